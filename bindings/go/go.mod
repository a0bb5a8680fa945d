module dtrain.dev/dtrain

go 1.19
