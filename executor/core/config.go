package core

import "errors"

// ErrConfig is matched by configuration errors: a missing or unsafe agent command, a
// bad STEP_MAX_RETRIES. Commands exit 2 on them, before touching the state.
var ErrConfig = errors.New("executor: configuration error")

// ConfigError is a configuration problem with the fix in its message.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }
func (e *ConfigError) Unwrap() error { return ErrConfig }
