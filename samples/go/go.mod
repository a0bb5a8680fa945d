module dtrain.dev/samples/go

go 1.19

require dtrain.dev/dtrain v0.0.0

replace dtrain.dev/dtrain => ../../bindings/go
