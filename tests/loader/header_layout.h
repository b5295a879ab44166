/* The layout of the ABI header as one compiler sees it: every struct's size and
 * the offset of the fields plugins and the runtime exchange. header_check_c.c
 * records it compiled as C99, header_check_cxx.cpp as C++; the test compares
 * the two, so a header that C and C++ read differently fails. */
#ifndef ENCGRAPH_TEST_HEADER_LAYOUT_H
#define ENCGRAPH_TEST_HEADER_LAYOUT_H

#include <encgraph/plugin_api.h>

#include <stddef.h>

/* clang-format off */
#define EG_LAYOUT(X)                                      \
  X(sizeof(eg_error))                                     \
  X(sizeof(eg_tensor))                                    \
  X(offsetof(eg_tensor, dtype))                           \
  X(offsetof(eg_tensor, device))                          \
  X(offsetof(eg_tensor, ndim))                            \
  X(offsetof(eg_tensor, shape))                           \
  X(sizeof(eg_config_entry))                              \
  X(offsetof(eg_config_entry, value))                     \
  X(sizeof(eg_host_api))                                  \
  X(offsetof(eg_host_api, struct_size))                   \
  X(offsetof(eg_host_api, host_context))                  \
  X(offsetof(eg_host_api, log))                           \
  X(sizeof(eg_path_info))                                 \
  X(offsetof(eg_path_info, min_token_budget))             \
  X(offsetof(eg_path_info, allow_zero_tokens))            \
  X(sizeof(eg_capture_axis))                              \
  X(offsetof(eg_capture_axis, keys))                      \
  X(sizeof(eg_buffer_info))                               \
  X(offsetof(eg_buffer_info, padding_logic))              \
  X(sizeof(eg_model_info))                                \
  X(offsetof(eg_model_info, out_hidden_size))             \
  X(offsetof(eg_model_info, num_buffers))                 \
  X(offsetof(eg_model_info, paths))                       \
  X(offsetof(eg_model_info, capture_axes))                \
  X(offsetof(eg_model_info, buffers))                     \
  X(sizeof(eg_item_spec))                                 \
  X(offsetof(eg_item_spec, path_tokens))                  \
  X(sizeof(eg_item_desc))                                 \
  X(offsetof(eg_item_desc, pixels))                       \
  X(offsetof(eg_item_desc, seed))                         \
  X(sizeof(eg_create_params))                             \
  X(offsetof(eg_create_params, weights))                  \
  X(offsetof(eg_create_params, num_config))               \
  X(sizeof(eg_graph_shape))                               \
  X(offsetof(eg_graph_shape, token_budget))               \
  X(offsetof(eg_graph_shape, axis_keys))                  \
  X(sizeof(eg_forward_args))                              \
  X(offsetof(eg_forward_args, buffers))                   \
  X(offsetof(eg_forward_args, output))                    \
  X(offsetof(eg_forward_args, workspace))                 \
  X(offsetof(eg_forward_args, stream))                    \
  X(sizeof(eg_replay_buffer))                             \
  X(offsetof(eg_replay_buffer, rows))                     \
  X(sizeof(eg_plugin_api))                                \
  X(offsetof(eg_plugin_api, name))                        \
  X(offsetof(eg_plugin_api, modalities))                  \
  X(offsetof(eg_plugin_api, devices))                     \
  X(offsetof(eg_plugin_api, create))                      \
  X(offsetof(eg_plugin_api, destroy))                     \
  X(offsetof(eg_plugin_api, model_info))                  \
  X(offsetof(eg_plugin_api, budget_range))                \
  X(offsetof(eg_plugin_api, item_create))                 \
  X(offsetof(eg_plugin_api, item_destroy))                \
  X(offsetof(eg_plugin_api, item_spec))                   \
  X(offsetof(eg_plugin_api, select_axis_keys))            \
  X(offsetof(eg_plugin_api, buffer_shape))                \
  X(offsetof(eg_plugin_api, output_shape))                \
  X(offsetof(eg_plugin_api, workspace_size))              \
  X(offsetof(eg_plugin_api, prepare_capture_inputs))      \
  X(offsetof(eg_plugin_api, prepare_replay_buffers))      \
  X(offsetof(eg_plugin_api, pad_buffer))                  \
  X(offsetof(eg_plugin_api, forward))                     \
  X(offsetof(eg_plugin_api, forward_eager))               \
  X(offsetof(eg_plugin_api, postprocess))                 \
  X(offsetof(eg_plugin_api, prepare_device))              \
  X(EG_ABI_VERSION_MAJOR)                                 \
  X(EG_ABI_VERSION_MINOR)                                 \
  X(EG_PLUGIN_API_V1_0_SIZE)                              \
  X(sizeof(eg_status))                                    \
  X(EG_ERR_INTERNAL)                                      \
  X(EG_PAD_CALLBACK)                                      \
  X(EG_DEVICE_CUDA)
/* clang-format on */

#define EG_LAYOUT_COUNT_ONE(e) +1
enum { EG_LAYOUT_COUNT = 0 EG_LAYOUT(EG_LAYOUT_COUNT_ONE) };

#ifdef __cplusplus
extern "C" {
#endif

/* Each writes EG_LAYOUT_COUNT values in EG_LAYOUT's order. */
void eg_layout_as_c(size_t* out);
void eg_layout_as_cxx(size_t* out);

#ifdef __cplusplus
}
#endif

#endif /* ENCGRAPH_TEST_HEADER_LAYOUT_H */
