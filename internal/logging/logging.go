// Package logging is the one place zap is configured: level, format
// (console on a terminal, JSON otherwise) and redaction of secrets, which
// happens on the encoded bytes so no field, message or error text can carry a
// configured token or key into the log (docs/operations.md#logs).
package logging

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// Options configure a logger.
type Options struct {
	// Level is debug, info, warn or error [info].
	Level string
	// Format is auto, console or json [auto: console when Out is a terminal].
	Format string
	// Secrets are replaced by "[REDACTED]" wherever they appear.
	Secrets []string
	// SecretFiles hold secrets too (the web token file, NATS credentials);
	// they are read again when they change.
	SecretFiles []string
	// Out is where lines go [os.Stderr].
	Out io.Writer
}

// New builds a logger from opts.
func New(opts Options) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(orDefault(opts.Level, "info"))
	if err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", opts.Level)
	}
	out := opts.Out
	if out == nil {
		out = os.Stderr
	}
	var enc zapcore.Encoder
	switch format := orDefault(opts.Format, "auto"); {
	case format == "console" || (format == "auto" && isTerminal(out)):
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		cfg.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(cfg)
	case format == "json" || format == "auto":
		cfg := zap.NewProductionEncoderConfig()
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(cfg)
	default:
		return nil, fmt.Errorf("log format %q: want auto, console or json", opts.Format)
	}
	if len(opts.Secrets) > 0 || len(opts.SecretFiles) > 0 {
		enc = redactor{Encoder: enc, s: NewSecrets(opts.Secrets, opts.SecretFiles)}
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(out)), level)
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.DPanicLevel)), nil
}

// Redact returns s with every secret replaced, for text that leaves the
// process by other routes than the log (error messages shown in status).
func Redact(s string, secrets []string) string {
	if r := replacer(secrets); r != nil {
		return r.Replace(s)
	}
	return s
}

// Redactor returns a function that replaces every secret in a text, built
// once for texts that leave the process often (tool output, error messages
// shown in chat).
func Redactor(secrets []string) func(string) string {
	r := replacer(secrets)
	if r == nil {
		return func(s string) string { return s }
	}
	return r.Replace
}

var jsonEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// minSecretLen keeps trivially short values ("", "x") from being treated as
// secrets and shredding every log line.
const minSecretLen = 6

func replacer(secrets []string) *strings.Replacer {
	var pairs []string
	seen := map[string]bool{}
	for _, s := range secrets {
		if len(s) < minSecretLen {
			continue
		}
		// The spellings a secret takes on its way into a line: as is,
		// escaped in a URL query or path (a token's ':' becomes %3A), and
		// escaped inside a JSON string.
		for _, v := range []string{s, url.QueryEscape(s), url.PathEscape(s), jsonEscaper.Replace(s)} {
			if !seen[v] {
				seen[v] = true
				pairs = append(pairs, v, "[REDACTED]")
			}
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	return strings.NewReplacer(pairs...)
}

// redactor rewrites each encoded entry.
type redactor struct {
	zapcore.Encoder
	s *Secrets
}

func (e redactor) Clone() zapcore.Encoder { return redactor{Encoder: e.Encoder.Clone(), s: e.s} }

func (e redactor) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	buf, err := e.Encoder.EncodeEntry(ent, fields)
	if err != nil {
		return buf, err
	}
	line := buf.String()
	if clean := e.s.Redact(line); clean != line {
		buf.Reset()
		buf.AppendString(clean)
	}
	return buf, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
