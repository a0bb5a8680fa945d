set(DTRAIN_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter)
