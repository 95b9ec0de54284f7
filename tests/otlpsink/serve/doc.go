// Command otlp-sink receives OTLP/HTTP traces and prints each trace as a
// tree of spans once no span has arrived for a moment:
//
//	go run ./tests/otlpsink/serve --listen 127.0.0.1:4318
package main
