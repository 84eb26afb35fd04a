module taskmeter/receivers/go

go 1.21
