package harness_test

import "runtime"

func runtimeGoexit() { runtime.Goexit() }
