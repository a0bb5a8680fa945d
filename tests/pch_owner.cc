// Owns the precompiled headers the test executables reuse (tests/CMakeLists.txt): a program
// compiled with exactly their flags, so that GCC accepts the header for each of them.
int main() { return 0; }
