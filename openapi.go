package leasekeeper

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the HTTP API (docs/openapi.json),
// which the server answers at GET /v1/openapi.json. Package internal/apitest
// checks answers against it and keeps it equal to this package's types.
//
//go:embed docs/openapi.json
var OpenAPI []byte
