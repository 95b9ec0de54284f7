package envd

import (
	"errors"
	"io"
	"mime/multipart"
)

// multipartReader reads a multipart body with the boundary from its
// Content-Type parameters.
func multipartReader(body io.Reader, params map[string]string) (*multipart.Reader, error) {
	boundary := params["boundary"]
	if boundary == "" {
		return nil, errors.New("multipart body: no boundary in Content-Type")
	}
	return multipart.NewReader(body, boundary), nil
}
