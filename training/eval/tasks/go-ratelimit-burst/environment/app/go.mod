module example.com/gateway

go 1.19
