package raftlock

import "strings"

// Longest lock or election name, and longest node path (docs/api.md).
const (
	maxNameLen = 256
	maxPathLen = 1024
)

func validComponent(c string) bool {
	if c == "" || c == "." || c == ".." {
		return false
	}
	for i := 0; i < len(c); i++ {
		b := c[i]
		switch {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		case b == '.', b == '_', b == ':', b == '-':
		default:
			return false
		}
	}
	return true
}

func validComponents(text string) bool {
	for _, c := range strings.Split(text, "/") {
		if !validComponent(c) {
			return false
		}
	}
	return true
}

// checkName refuses a lock or election name the server would refuse, so
// nothing that could change a URL's meaning (`?`, `#`, `..`) is sent.
func checkName(name string) error {
	if len(name) == 0 || len(name) > maxNameLen || !validComponents(name) {
		return apiError(CodeBadRequest,
			"invalid name %q: 1 to %d bytes of [A-Za-z0-9._:-] in non-empty '/'-separated components, none '.' or '..'",
			name, maxNameLen)
	}
	return nil
}

// checkPath refuses a node path the server would refuse; "/" is the root.
func checkPath(path string) error {
	if path == "/" {
		return nil
	}
	if !strings.HasPrefix(path, "/") || len(path) > maxPathLen || !validComponents(path[1:]) {
		return apiError(CodeBadRequest,
			"invalid node path %q: '/' then at most %d bytes of [A-Za-z0-9._:-] in non-empty '/'-separated components, none '.' or '..'",
			path, maxPathLen)
	}
	return nil
}
