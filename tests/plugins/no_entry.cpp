// A shared object that is not a lazylab plugin: no entry point.
extern "C" __attribute__((visibility("default"))) int some_other_symbol() { return 42; }
