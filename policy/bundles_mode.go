package policy

import (
	"bytes"
	"errors"
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// InMode returns a bundle's source with its bindings' validationActions
// set to what the mode stands for, for installing as native
// ValidatingAdmissionPolicies (off is not for export: the bundle is left
// out). Other sources, and a bundle enforced, are returned as they are.
// The YAML is edited as YAML: every ValidatingAdmissionPolicyBinding
// document gets spec.validationActions [<action>], however it was written;
// comments and everything else are kept.
func (s Source) InMode(m Mode) (Source, error) {
	if s.Bundle == "" || m == ModeEnforce {
		return s, nil
	}
	data, err := withValidationActions(s.Data, string(m.action()))
	if err != nil {
		return Source{}, fmt.Errorf("%s in mode %s: %w", s.Name, m, err)
	}
	out := s
	out.Data = data
	return out, nil
}

// withValidationActions sets spec.validationActions of every binding in a
// YAML stream to [action]. Documents are split where YAML ends them (a
// "---" line); a binding is decoded, edited and encoded again, every other
// document is kept byte for byte.
func withValidationActions(data []byte, action string) ([]byte, error) {
	var out bytes.Buffer
	for i, doc := range documents(data) {
		if i > 0 {
			out.WriteString("---\n")
		}
		var n yaml.Node
		if err := yaml.Unmarshal(doc, &n); err != nil {
			return nil, err
		}
		if len(n.Content) != 1 || scalarAt(n.Content[0], "kind") != "ValidatingAdmissionPolicyBinding" {
			out.Write(doc)
			continue
		}
		spec := valueAt(n.Content[0], "spec")
		if spec == nil {
			return nil, errors.New("a ValidatingAdmissionPolicyBinding without spec")
		}
		setKey(spec, "validationActions", &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle,
			Content: []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!str", Value: action}}})
		enc := yaml.NewEncoder(&out)
		enc.SetIndent(2)
		if err := enc.Encode(&n); err != nil {
			return nil, err
		}
		if err := enc.Close(); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
}

// documents splits a YAML stream at its document markers ("---" lines).
func documents(data []byte) [][]byte {
	var out [][]byte
	start := 0
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data) - off
		} else {
			end++
		}
		line := bytes.TrimRight(data[off:off+end], "\r\n")
		if bytes.Equal(line, []byte("---")) {
			out = append(out, data[start:off])
			start = off + end
		}
		off += end
	}
	return append(out, data[start:])
}

// valueAt is the value under key in a mapping node, or nil.
func valueAt(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// scalarAt is the scalar value under key in a mapping node, or "".
func scalarAt(n *yaml.Node, key string) string {
	if c := valueAt(n, key); c != nil && c.Kind == yaml.ScalarNode {
		return c.Value
	}
	return ""
}

// setKey puts value under key in a mapping node, replacing what was there.
func setKey(n *yaml.Node, key string, value *yaml.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			n.Content[i+1] = value
			return
		}
	}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
}
