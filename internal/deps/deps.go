// Package main pins modules that the project uses before any package imports them.
package main
import (
 _ "github.com/go-chi/chi/v5"
 _ "github.com/ebitengine/purego"
 _ "github.com/rs/zerolog"
 _ "github.com/google/uuid"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "go.yaml.in/yaml/v3"
 _ "github.com/openai/openai-go/v3"
)
func main(){}
