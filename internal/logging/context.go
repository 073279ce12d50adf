package logging

import (
	"context"

	"go.uber.org/zap"
)

type fieldsKey struct{}

// WithFields returns a context whose log lines carry fields, added to those
// ctx already carries. The agent puts the turn id here, so the lines the
// router, the providers and the tools write while serving that turn name it
// too, although each of them logs through its own named logger.
func WithFields(ctx context.Context, fields ...zap.Field) context.Context {
	if len(fields) == 0 {
		return ctx
	}
	prev, _ := ctx.Value(fieldsKey{}).([]zap.Field)
	all := make([]zap.Field, 0, len(prev)+len(fields))
	all = append(append(all, prev...), fields...)
	return context.WithValue(ctx, fieldsKey{}, all)
}

// From returns log with the fields ctx carries (see WithFields), or log
// itself when it carries none. The fields are encoded on the first line
// written, not here: every model call takes such a logger, and most write
// nothing at the configured level (encoding them eagerly showed in the bytes
// a turn allocated: docs/BENCHMARKS.md#figures-behind-code-choices).
func From(ctx context.Context, log *zap.Logger) *zap.Logger {
	fields, _ := ctx.Value(fieldsKey{}).([]zap.Field)
	if len(fields) == 0 {
		return log
	}
	return log.WithLazy(fields...)
}
