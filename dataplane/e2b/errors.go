package e2b

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentsandbox/reconciler/dataplane/router"
)

// apiError is a control-plane refusal in E2B's shape: {"code", "message"},
// code being the HTTP status (the SDK reads 404 and 409 from the body).
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Message }

func errorf(code int, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// fromRouter turns a refusal of the router's reviews into E2B's shape.
func fromRouter(e *router.Error) *apiError {
	return &apiError{Code: e.Status, Message: e.Detail}
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	switch e.Code {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `X-API-KEY realm="sandbox-router"`)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Code, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"code":500,"message":"internal error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// connectError is a data-plane refusal in the Connect protocol's error
// shape ({"code": "unauthenticated", "message": ...}), which the SDK's
// Connect client and its plain /files calls both show.
type connectError struct {
	status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeConnectError(w http.ResponseWriter, e *connectError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `X-Access-Token realm="sandbox-router"`)
	}
	writeJSON(w, e.status, e)
}
