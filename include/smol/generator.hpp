// The generator layer (the top of the library), one header per concept:
//   generation/params.hpp          GeneratorOptions, GenerateParams, GenerateResult, StopReason
//   generation/async.hpp           AsyncGeneration (generate_async / chat_async handles)
//   generation/session_format.hpp  the saved-session byte format
//   generation/generator.hpp       smol::Generator and try_load_model (with the
//                                  thread-safety contract)
#pragma once

#include "generation/async.hpp"
#include "generation/generator.hpp"
#include "generation/params.hpp"
#include "generation/session_format.hpp"
