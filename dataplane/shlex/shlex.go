package shlex

import (
	"errors"
	"strings"
)

// The errors Split returns carry the messages of Python's shlex, so a failed
// command reads the same as it does on upstream's runtime.
var (
	errNoClosingQuotation = errors.New("No closing quotation") //nolint:staticcheck // Python's message, verbatim
	errNoEscapedCharacter = errors.New("No escaped character") //nolint:staticcheck // Python's message, verbatim
)

// Split splits a command line into words exactly as Python's shlex.split (POSIX
// mode, no comments) does, which is what upstream's runtime runs commands with:
//
//   - words are separated by runs of space, tab, carriage return or newline;
//   - 'single quotes' keep everything literally, backslashes included;
//   - "double quotes" keep everything literally except \" and \\, which stand
//     for " and \ (so "\$x" is the two bytes \$ followed by x);
//   - outside quotes a backslash takes the next byte literally;
//   - quoted parts join the word around them (a"b c"d is one word), and an
//     empty quoted string is a word of its own (a pair of quotes with
//     nothing between them gives the empty word).
//
// There is no expansion of any kind ($VAR, ~, globs, ;, |, &&, > are plain
// bytes). An unterminated quote or a trailing backslash is an error.
func Split(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false // a word has started, possibly with an empty quoted part
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\r', '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case '\\':
			if i+1 == len(s) {
				return nil, errNoEscapedCharacter
			}
			i++
			w.WriteByte(s[i])
			inWord = true
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errNoClosingQuotation
			}
			w.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case '"':
			n, err := doubleQuoted(s[i+1:], &w)
			if err != nil {
				return nil, err
			}
			i += n
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// doubleQuoted writes the body of a double-quoted part (s starts after the
// opening quote) to w and returns how many bytes of s it used, the closing
// quote included.
func doubleQuoted(s string, w *strings.Builder) (int, error) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return i + 1, nil
		case '\\':
			if i+1 == len(s) {
				return 0, errNoEscapedCharacter
			}
			if next := s[i+1]; next == '"' || next == '\\' {
				w.WriteByte(next)
				i++
				continue
			}
			w.WriteByte(c)
		default:
			w.WriteByte(c)
		}
	}
	return 0, errNoClosingQuotation
}
