module example.invalid/raftlock/clients/go

go 1.19
