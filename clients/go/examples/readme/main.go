package main

import (
	"context"
	"fmt"
	"log"
	"time"

	raftlock "example.invalid/raftlock/clients/go"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := raftlock.New(raftlock.Config{}) // $RAFTLOCK_ENDPOINTS, else 127.0.0.1:7001-7003
	must(err)
	session, err := raftlock.NewSession(ctx, client, "readme", 10*time.Second)
	must(err)
	defer session.Close(ctx)
	mu := raftlock.NewMutex(session, "orders/42")
	must(mu.Lock(ctx))
	fmt.Println("locked orders/42 with fencing token", mu.FencingToken())
	must(mu.Unlock(ctx))
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
