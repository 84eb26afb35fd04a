module taskmeter/driver

go 1.21
