package sandbox

// LinksOut exposes linksOut to the tests.
var LinksOut = linksOut

// ForceIsolation makes l start commands as on a machine that allows only
// iso (IsolationSubreaper: no namespaces, as under RestrictNamespaces).
func (l *Launcher) ForceIsolation(iso string) { l.isolation = iso }
