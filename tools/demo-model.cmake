# The demo model: a few-MB SmolLM3-format GGUF with random weights (preset demo:
# hidden 256, 4 layers, 4/1 heads, ffn 768, ctx 4096, byte-level vocabulary,
# Q4_K_M), written at build time by smol-make-model as part of `all` so that the
# README's first command has a model to run without any download.
#
# For examples and tests:
#   SMOL_DEMO_MODEL_PATH (cache variable): where the file is written,
#     ${CMAKE_BINARY_DIR}/demo/smol-demo.gguf by default.
#   smol_demo_model_path (INTERFACE target): link it to get the compile definition
#     SMOL_DEMO_MODEL_PATH="<that path>", e.g.
#       target_link_libraries(smol-generate PRIVATE smol_demo_model_path)
#       ... const char* model = SMOL_DEMO_MODEL_PATH;
#     Add `add_dependencies(<target> smol-demo-model)` if a target must not be
#     built before the file exists (the file is not needed to compile).
#   smol-demo-model (custom target, in ALL): builds the file.
set(SMOL_DEMO_MODEL_PATH "${CMAKE_BINARY_DIR}/demo/smol-demo.gguf"
    CACHE FILEPATH "Where the build writes the random-weight demo model")

if(NOT TARGET smol_demo_model_path)
  add_library(smol_demo_model_path INTERFACE)
  target_compile_definitions(smol_demo_model_path INTERFACE
    SMOL_DEMO_MODEL_PATH="${SMOL_DEMO_MODEL_PATH}")
endif()

if(SMOL_BUILD_EXAMPLES AND TARGET smol-make-model)
  get_filename_component(_smol_demo_dir "${SMOL_DEMO_MODEL_PATH}" DIRECTORY)
  add_custom_command(
    OUTPUT "${SMOL_DEMO_MODEL_PATH}"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${_smol_demo_dir}"
    COMMAND smol-make-model --out "${SMOL_DEMO_MODEL_PATH}" --preset demo --byte-vocab
            --recipe q4_k_m --seed 1 --threads 2 --quiet
    DEPENDS smol-make-model
    COMMENT "Making the demo model ${SMOL_DEMO_MODEL_PATH}"
    VERBATIM)
  add_custom_target(smol-demo-model ALL DEPENDS "${SMOL_DEMO_MODEL_PATH}")
endif()
