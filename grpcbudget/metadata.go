package grpcbudget

import (
	"context"
	"strconv"

	"google.golang.org/grpc/metadata"
)

// previousAttemptsKey is the request header that tells the server how many
// attempts of the call came before this one (gRFC A6, "Exposed Retry
// Metadata"). grpc-go sends it as metadata: it is not among the headers
// its transport reserves.
const previousAttemptsKey = "grpc-previous-rpc-attempts"

// withPreviousAttempts returns ctx with outgoing metadata that says n
// attempts came before: previousAttemptsKey set to n, in place of any
// value the caller's metadata had for it, the rest kept. It costs a copy of
// the metadata, so it is for retries only: the first attempt sends the
// caller's context as it is.
func withPreviousAttempts(ctx context.Context, n int) context.Context {
	md, ok := metadata.FromOutgoingContext(ctx) // a copy, the appended pairs merged in
	if !ok {
		md = make(metadata.MD, 1)
	}
	md[previousAttemptsKey] = []string{strconv.Itoa(n)}
	return metadata.NewOutgoingContext(ctx, md)
}
