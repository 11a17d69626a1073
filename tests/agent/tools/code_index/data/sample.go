package server

import "net/http"

const DefaultPort = 8080

const (
	modeDev  = "dev"
	modeProd = "prod"
)

type Handler interface {
	Serve(w http.ResponseWriter, r *http.Request) error
}

type Server struct {
	addr string
}

type Port int

type Alias = Server

func New(addr string) *Server {
	return &Server{addr: addr}
}

func (s *Server) Start() error {
	return nil
}

func (s Server) Addr() string { return s.addr }

func (st *Stack[T]) Push(v T) {}
