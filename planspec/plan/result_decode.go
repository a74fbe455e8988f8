package plan

import (
	"encoding/json"

	"github.com/stepseq/stepseq/planspec/resultschema"
	"gopkg.in/yaml.v3"
)

// resultSchema reads a step's result schema and compiles it: a schema that does
// not compile is a plan error at its node.
func (d *planDecoder) resultSchema(n *yaml.Node, field string) json.RawMessage {
	if n.Kind != yaml.MappingNode && !(n.Kind == yaml.ScalarNode && n.Tag == "!!bool") {
		d.fail(n, field, "result: want a JSON Schema (a mapping, like {type: object, required: [url]}), got %s", describeNode(n))
		return nil
	}
	v, ok := d.value(n, field, 0)
	if !ok {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		d.fail(n, field, "result: %v", err)
		return nil
	}
	if _, err := resultschema.Compile(raw); err != nil {
		d.fail(n, field, "result: not a valid JSON Schema (draft 2020-12): %v", err)
		return nil
	}
	return raw
}
