package core

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// impure are the packages the core may not import: processes, files, the
// network, signals, the system. What it must know of the world comes with its
// inputs or from its Probe.
var impure = []string{"os", "os/exec", "os/signal", "syscall", "net", "io/ioutil", "unsafe", "plugin", "runtime/cgo"}

// wallClock are the time package's ways to read or wait on the clock: the
// core's time comes with each input.
var wallClock = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick"}

// TestCore_IsPure: the core's non-test files import planspec (and its subpackages,
// pure as it is) and the standard library only, none of its impure packages (os, exec, syscall, net…), and
// never read or wait on the wall clock, so that the compiler and this test,
// not a convention, keep the state machine a function of its inputs.
func TestCore_IsPure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		timeName := ""
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch first, _, _ := strings.Cut(path, "/"); {
			case path == "github.com/stepseq/stepseq/planspec", strings.HasPrefix(path, "github.com/stepseq/stepseq/planspec/"):
			case strings.Contains(first, "."):
				t.Errorf("%s imports %s: the core imports planspec and the standard library only", fset.Position(imp.Pos()), path)
			case isImpure(path):
				t.Errorf("%s imports %s: the core does no I/O; ask it of the driver with an effect, or of the Probe", fset.Position(imp.Pos()), path)
			}
			if path == "time" {
				timeName = "time"
				if imp.Name != nil {
					timeName = imp.Name.Name
				}
			}
		}
		if timeName == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == timeName && slices.Contains(wallClock, sel.Sel.Name) {
				t.Errorf("%s: time.%s: the core's time comes with each input (Handle's now)", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source file of the core found")
	}
}

func isImpure(path string) bool {
	for _, p := range impure {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
