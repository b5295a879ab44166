/* The layout of the ABI header as one compiler sees it: every struct's size and
 * the offset of every field, the header's constants and its size helpers, each
 * with the value ABI 1.2 freezes. header_check_c.c records them compiled as
 * C99, header_check_cxx.cpp as C++; the test compares both with the frozen
 * values, so a header that C and C++ read differently, or a released field
 * that moves, fails. */
#ifndef ENCGRAPH_TEST_HEADER_LAYOUT_H
#define ENCGRAPH_TEST_HEADER_LAYOUT_H

#include <encgraph/plugin_api.h>

#include <stddef.h>

/* X(expression, frozen value) */
/* clang-format off */
#define EG_LAYOUT(X) \
  X(sizeof(eg_error), 1024) \
  X(offsetof(eg_error, message), 0) \
  X(sizeof(eg_tensor), 72) \
  X(offsetof(eg_tensor, data), 0) \
  X(offsetof(eg_tensor, dtype), 8) \
  X(offsetof(eg_tensor, device), 12) \
  X(offsetof(eg_tensor, ndim), 16) \
  X(offsetof(eg_tensor, reserved), 20) \
  X(offsetof(eg_tensor, shape), 24) \
  X(sizeof(eg_config_entry), 16) \
  X(offsetof(eg_config_entry, key), 0) \
  X(offsetof(eg_config_entry, value), 8) \
  X(sizeof(eg_host_api), 48) \
  X(offsetof(eg_host_api, abi_major), 0) \
  X(offsetof(eg_host_api, abi_minor), 4) \
  X(offsetof(eg_host_api, struct_size), 8) \
  X(offsetof(eg_host_api, reserved), 12) \
  X(offsetof(eg_host_api, host_context), 16) \
  X(offsetof(eg_host_api, log), 24) \
  X(offsetof(eg_host_api, item_desc_size), 32) \
  X(offsetof(eg_host_api, item_spec_size), 36) \
  X(offsetof(eg_host_api, tuning_option), 40) \
  X(sizeof(eg_path_info), 24) \
  X(offsetof(eg_path_info, name), 0) \
  X(offsetof(eg_path_info, min_token_budget), 8) \
  X(offsetof(eg_path_info, allow_zero_tokens), 16) \
  X(offsetof(eg_path_info, reserved), 20) \
  X(sizeof(eg_capture_axis), 24) \
  X(offsetof(eg_capture_axis, name), 0) \
  X(offsetof(eg_capture_axis, num_keys), 8) \
  X(offsetof(eg_capture_axis, reserved), 12) \
  X(offsetof(eg_capture_axis, keys), 16) \
  X(sizeof(eg_buffer_info), 16) \
  X(offsetof(eg_buffer_info, name), 0) \
  X(offsetof(eg_buffer_info, dtype), 8) \
  X(offsetof(eg_buffer_info, padding_logic), 12) \
  X(sizeof(eg_output_info), 32) \
  X(offsetof(eg_output_info, name), 0) \
  X(offsetof(eg_output_info, width), 8) \
  X(offsetof(eg_output_info, dtype), 16) \
  X(offsetof(eg_output_info, reserved), 20) \
  X(offsetof(eg_output_info, rows_per_item), 24) \
  X(sizeof(eg_model_info), 784) \
  X(offsetof(eg_model_info, struct_size), 0) \
  X(offsetof(eg_model_info, reserved), 4) \
  X(offsetof(eg_model_info, out_hidden_size), 8) \
  X(offsetof(eg_model_info, out_dtype), 16) \
  X(offsetof(eg_model_info, max_frames_per_video), 20) \
  X(offsetof(eg_model_info, num_paths), 24) \
  X(offsetof(eg_model_info, num_capture_axes), 28) \
  X(offsetof(eg_model_info, num_buffers), 32) \
  X(offsetof(eg_model_info, reserved2), 36) \
  X(offsetof(eg_model_info, paths), 40) \
  X(offsetof(eg_model_info, capture_axes), 136) \
  X(offsetof(eg_model_info, buffers), 232) \
  X(offsetof(eg_model_info, num_outputs), 488) \
  X(offsetof(eg_model_info, reserved3), 492) \
  X(offsetof(eg_model_info, outputs), 496) \
  X(offsetof(eg_model_info, path_units), 752) \
  X(sizeof(eg_item_spec), 56) \
  X(offsetof(eg_item_spec, input_size), 0) \
  X(offsetof(eg_item_spec, output_tokens), 8) \
  X(offsetof(eg_item_spec, frames), 16) \
  X(offsetof(eg_item_spec, path_tokens), 24) \
  X(sizeof(eg_item_desc), 48) \
  X(offsetof(eg_item_desc, modality), 0) \
  X(offsetof(eg_item_desc, channels), 4) \
  X(offsetof(eg_item_desc, height), 8) \
  X(offsetof(eg_item_desc, width), 16) \
  X(offsetof(eg_item_desc, frames), 24) \
  X(offsetof(eg_item_desc, pixels), 32) \
  X(offsetof(eg_item_desc, seed), 40) \
  X(sizeof(eg_create_params), 40) \
  X(offsetof(eg_create_params, struct_size), 0) \
  X(offsetof(eg_create_params, device), 4) \
  X(offsetof(eg_create_params, device_index), 8) \
  X(offsetof(eg_create_params, reserved), 12) \
  X(offsetof(eg_create_params, weights), 16) \
  X(offsetof(eg_create_params, config), 24) \
  X(offsetof(eg_create_params, num_config), 32) \
  X(sizeof(eg_graph_shape), 64) \
  X(offsetof(eg_graph_shape, path), 0) \
  X(offsetof(eg_graph_shape, num_axis_keys), 4) \
  X(offsetof(eg_graph_shape, token_budget), 8) \
  X(offsetof(eg_graph_shape, max_batch_size), 16) \
  X(offsetof(eg_graph_shape, max_frames_per_batch), 24) \
  X(offsetof(eg_graph_shape, axis_keys), 32) \
  X(sizeof(eg_forward_args), 192) \
  X(offsetof(eg_forward_args, shape), 0) \
  X(offsetof(eg_forward_args, buffers), 64) \
  X(offsetof(eg_forward_args, num_buffers), 72) \
  X(offsetof(eg_forward_args, struct_size), 76) \
  X(offsetof(eg_forward_args, output), 80) \
  X(offsetof(eg_forward_args, workspace), 152) \
  X(offsetof(eg_forward_args, workspace_size), 160) \
  X(offsetof(eg_forward_args, stream), 168) \
  X(offsetof(eg_forward_args, outputs), 176) \
  X(offsetof(eg_forward_args, num_outputs), 184) \
  X(offsetof(eg_forward_args, reserved2), 188) \
  X(sizeof(eg_replay_buffer), 80) \
  X(offsetof(eg_replay_buffer, staging), 0) \
  X(offsetof(eg_replay_buffer, rows), 72) \
  X(sizeof(eg_plugin_api), 232) \
  X(offsetof(eg_plugin_api, abi_major), 0) \
  X(offsetof(eg_plugin_api, abi_minor), 4) \
  X(offsetof(eg_plugin_api, struct_size), 8) \
  X(offsetof(eg_plugin_api, reserved), 12) \
  X(offsetof(eg_plugin_api, name), 16) \
  X(offsetof(eg_plugin_api, version), 24) \
  X(offsetof(eg_plugin_api, description), 32) \
  X(offsetof(eg_plugin_api, modalities), 40) \
  X(offsetof(eg_plugin_api, devices), 44) \
  X(offsetof(eg_plugin_api, create), 48) \
  X(offsetof(eg_plugin_api, destroy), 56) \
  X(offsetof(eg_plugin_api, model_info), 64) \
  X(offsetof(eg_plugin_api, budget_range), 72) \
  X(offsetof(eg_plugin_api, item_create), 80) \
  X(offsetof(eg_plugin_api, item_destroy), 88) \
  X(offsetof(eg_plugin_api, item_spec), 96) \
  X(offsetof(eg_plugin_api, select_axis_keys), 104) \
  X(offsetof(eg_plugin_api, buffer_shape), 112) \
  X(offsetof(eg_plugin_api, output_shape), 120) \
  X(offsetof(eg_plugin_api, workspace_size), 128) \
  X(offsetof(eg_plugin_api, prepare_capture_inputs), 136) \
  X(offsetof(eg_plugin_api, prepare_replay_buffers), 144) \
  X(offsetof(eg_plugin_api, pad_buffer), 152) \
  X(offsetof(eg_plugin_api, forward), 160) \
  X(offsetof(eg_plugin_api, forward_eager), 168) \
  X(offsetof(eg_plugin_api, postprocess), 176) \
  X(offsetof(eg_plugin_api, prepare_device), 184) \
  X(offsetof(eg_plugin_api, prepare_capture_staging), 192) \
  X(offsetof(eg_plugin_api, output_shape_at), 200) \
  X(offsetof(eg_plugin_api, postprocess_outputs), 208) \
  X(offsetof(eg_plugin_api, item_spec_for_desc), 216) \
  X(offsetof(eg_plugin_api, flags), 224) \
  X(EG_ABI_VERSION_MAJOR, 1) \
  X(EG_ABI_VERSION_MINOR, 4) \
  X(EG_MAX_DIMS, 6) \
  X(EG_MAX_PATHS, 4) \
  X(EG_MAX_CAPTURE_AXES, 4) \
  X(EG_MAX_BUFFERS, 16) \
  X(EG_ERROR_MESSAGE_CAPACITY, 1024) \
  X(EG_MAX_OUTPUTS, 8) \
  X(EG_PLUGIN_API_V1_0_SIZE, 192) \
  X(EG_PLUGIN_API_V1_1_SIZE, 216) \
  X(EG_PLUGIN_API_V1_2_SIZE, 224) \
  X(EG_PLUGIN_API_V1_4_SIZE, 232) \
  X(EG_PLUGIN_CONCURRENT_ITEMS, 1) \
  X(EG_HOST_API_V1_0_SIZE, 32) \
  X(EG_MODEL_INFO_V1_0_SIZE, 488) \
  X(EG_FORWARD_ARGS_V1_0_SIZE, 176) \
  X(EG_ITEM_DESC_V1_0_SIZE, 48) \
  X(EG_ITEM_SPEC_V1_0_SIZE, 56) \
  X(sizeof(eg_status), 4) \
  X(EG_ERR_INTERNAL, 7) \
  X(EG_PAD_CALLBACK, 2) \
  X(EG_DEVICE_CUDA, 2) \
  X(EG_DTYPE_U8, 6) \
  X(EG_MODALITY_VIDEO, 2) \
  X(EG_LOG_ERROR, 4) \
  X(EG_FIELD_END(eg_plugin_api, prepare_device), 192) \
  X(EG_FIELD_END(eg_plugin_api, postprocess_outputs), 216) \
  X(EG_FIELD_END(eg_plugin_api, item_spec_for_desc), 224) \
  X(EG_FIELD_END(eg_plugin_api, flags), 232) \
  X(EG_FIELD_END(eg_host_api, log), 32) \
  X(EG_FIELD_END(eg_model_info, buffers), 488) \
  X(EG_FIELD_END(eg_forward_args, stream), 176) \
  X(EG_HAS_FIELD(192, eg_plugin_api, prepare_device), 1) \
  X(EG_HAS_FIELD(192, eg_plugin_api, prepare_capture_staging), 0) \
  X(EG_HAS_FIELD(200, eg_plugin_api, prepare_capture_staging), 1) \
  X(EG_HAS_FIELD(200, eg_plugin_api, output_shape_at), 0) \
  X(EG_HAS_FIELD(216, eg_plugin_api, postprocess_outputs), 1) \
  X(EG_HAS_FIELD(216, eg_plugin_api, item_spec_for_desc), 0) \
  X(EG_HAS_FIELD(224, eg_plugin_api, item_spec_for_desc), 1) \
  X(EG_HAS_FIELD(224, eg_plugin_api, flags), 0) \
  X(EG_HAS_FIELD(232, eg_plugin_api, flags), 1) \
  X(EG_HAS_FIELD(32, eg_host_api, item_desc_size), 0) \
  X(EG_HAS_FIELD(40, eg_host_api, item_spec_size), 1) \
  X(EG_HAS_FIELD(40, eg_host_api, tuning_option), 0) \
  X(EG_HAS_FIELD(48, eg_host_api, tuning_option), 1) \
  X(EG_HOST_API_V1_1_SIZE, 40)
/* clang-format on */

#define EG_LAYOUT_COUNT_ONE(e, v) +1
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
