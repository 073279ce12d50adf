package skills

import (
	"strconv"
	"strings"
)

// Summary renders the skills list for the system prompt
// (docs/skills.md#in-the-system-prompt):
//
//	<skills>
//	  <skill available="true"><name>…</name><description>…</description><location>…</location></skill>
//	</skills>
//
// Unavailable skills carry <requires> with what is missing, so the model can
// tell the user what to install.
func Summary(list []Skill) string {
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("<skills>\n")
	for _, s := range list {
		b.WriteString(`  <skill available="`)
		b.WriteString(strconv.FormatBool(s.Available()))
		b.WriteString(`"><name>`)
		b.WriteString(escape(s.Name))
		b.WriteString("</name><description>")
		b.WriteString(escape(s.Description))
		b.WriteString("</description><location>")
		b.WriteString(escape(s.Location))
		b.WriteString("</location>")
		if !s.Available() {
			b.WriteString("<requires>")
			b.WriteString(escape(strings.Join(s.Missing, ", ")))
			b.WriteString("</requires>")
		}
		b.WriteString("</skill>\n")
	}
	b.WriteString("</skills>")
	return b.String()
}

// AlwaysBodies renders the full bodies of available always-on skills, each
// under a "### name" heading.
func AlwaysBodies(list []Skill) string {
	var b strings.Builder
	for _, s := range list {
		if !s.Always || !s.Available() {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("### ")
		b.WriteString(s.Name)
		b.WriteString("\n\n")
		b.WriteString(s.Body)
	}
	return b.String()
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func escape(s string) string { return xmlEscaper.Replace(s) }
