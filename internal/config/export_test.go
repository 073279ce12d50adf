package config

// TestSections lets sections_ext_test.go (package config_test, which may
// import the channel table) give this package's tests the real channel
// sections, which they cannot import themselves.
var TestSections = &testSections
