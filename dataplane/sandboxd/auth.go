package sandboxd

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentsandbox/reconciler/dataplane/runtime"
)

// TokenMetadataKey is the gRPC metadata key that carries the runtime's
// token: the REST header X-Sandbox-Runtime-Token, lower-cased as gRPC
// metadata keys are.
var TokenMetadataKey = strings.ToLower(runtime.TokenHeader)

// RequireToken returns the server options (a unary and a stream
// interceptor) for NewGRPCServer that refuse, with codes.Unauthenticated,
// every call whose metadata does not carry token under TokenMetadataKey.
// The token is compared in constant time. An empty token requires nothing
// (no options).
func RequireToken(token string) []grpc.ServerOption {
	if token == "" {
		return nil
	}
	check := func(ctx context.Context) error {
		var got string
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get(TokenMetadataKey); len(v) == 1 {
				got = v[0]
			}
		}
		if !runtime.TokenMatches(got, token) {
			return status.Error(codes.Unauthenticated, "missing or wrong "+TokenMetadataKey+
				" metadata: this runtime serves only calls that come through the sandbox router")
		}
		return nil
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
			if err := check(ctx); err != nil {
				return nil, err
			}
			return next(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
			if err := check(ss.Context()); err != nil {
				return err
			}
			return next(srv, ss)
		}),
	}
}
