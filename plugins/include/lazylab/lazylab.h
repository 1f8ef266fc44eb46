// lazylab's C++ API in one include, for programs built against an installed
// lazylab (`pkg-config --cflags --libs lazylab`, or CMake's
// find_package(lazylab) and lazylab::lazylab): the lazy Tensor API, backends
// loaded from plugins, pass pipelines, the engine that compiles and caches
// traced graphs, the .lzir text format, the library's version, and what pass
// and strategy plugins build on (core/pass_plugin.h).
#pragma once

#include "core/backend.h"
#include "core/engine.h"
#include "core/fusion_strategy.h"
#include "core/pass_plugin.h"
#include "core/pipeline.h"
#include "core/tensor.h"
#include "core/tensor_ops.h"
#include "core/text_format.h"
#include "core/version.h"
