package sandbox

// LinksOut exposes linksOut to the tests.
var LinksOut = linksOut
