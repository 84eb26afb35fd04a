module taskmeter/clients/go

go 1.21
