#include "inputs.hpp"

#include "errors.hpp"
#include "video_path.hpp"

#include <encgraph/error.hpp>

#include <cstring>

namespace py = pybind11;

namespace encgraph::python {
namespace {

std::string type_name(const py::handle& value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

bool is_path(const py::handle& value) {
  return py::isinstance<py::str>(value) || py::hasattr(value, "__fspath__");
}

std::string path_of(const py::handle& value) {
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  const py::object p = py::module_::import("os").attr("fspath")(value);
  if (!py::isinstance<py::str>(p))
    throw py::type_error("paths must be text; bytes paths are not supported, got " +
                         std::string(py::repr(p)));
  return p.cast<std::string>();
}

// A PIL image, recognised without importing PIL (only a caller who has
// imported it can hand one over).
bool is_pil_image(const py::handle& value) {
  const py::dict modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("PIL.Image")) return false;
  const py::object image_class = modules["PIL.Image"].attr("Image");
  return py::isinstance(value, image_class);
}

bool is_buffer(const py::handle& value) {
  return PyObject_CheckBuffer(value.ptr()) != 0;
}

// A PIL image as RGB bytes: Image.convert("RGB") (what transformers' image
// loading does), copied out.
Pixels pil_pixels(const py::handle& image) {
  py::object rgb = py::reinterpret_borrow<py::object>(image);
  if (image.attr("mode").cast<std::string>() != "RGB") rgb = image.attr("convert")("RGB");
  const py::tuple size = rgb.attr("size");
  Pixels p;
  p.width = size[0].cast<int64_t>();
  p.height = size[1].cast<int64_t>();
  const py::bytes bytes = rgb.attr("tobytes")();
  const std::string_view view = bytes;
  p.owned.assign(view.begin(), view.end());
  p.data = p.owned.data();
  return p;
}

// HxWx3 (dims 3) or TxHxWx3 (dims 4) uint8 pixels, borrowed when C-contiguous.
Pixels array_pixels(const py::handle& value, int dims, const std::string& label, Inputs& inputs) {
  auto info = std::make_unique<py::buffer_info>(
      py::reinterpret_borrow<py::buffer>(value).request(/*writable=*/false));
  const std::string shape_text = [&] {
    std::string s = "(";
    for (size_t d = 0; d < info->shape.size(); ++d)
      s += (d ? ", " : "") + std::to_string(info->shape[d]);
    return s + (info->shape.size() == 1 ? ",)" : ")");
  }();
  const std::string want = dims == 3 ? "HxWx3" : "TxHxWx3";
  if (info->itemsize != 1 ||
      (info->format != "B" && info->format != "=B" && info->format != "<B" && info->format != "|B"))
    raise_input(label + ": expected " + want + " uint8 pixels, got an array of format '" +
                info->format + "' (itemsize " + std::to_string(info->itemsize) +
                "); convert it, e.g. array.astype(numpy.uint8)");
  if (info->ndim != dims || info->shape[dims - 1] != 3)
    raise_input(label + ": expected " + want + " uint8 pixels (RGB), got shape " + shape_text +
                (info->ndim == dims && info->shape[dims - 1] == 4
                     ? "; drop the alpha channel: array[..., :3]"
                     : ""));
  for (py::ssize_t d = 0; d < info->ndim; ++d)
    if (info->shape[d] <= 0) raise_input(label + ": the array is empty, shape " + shape_text);
  Pixels p;
  p.frames = dims == 4 ? info->shape[0] : 1;
  p.height = info->shape[dims - 3];
  p.width = info->shape[dims - 2];
  // Row-major compact: used in place (numpy's default layout).
  bool compact = true;
  py::ssize_t expected = 1;
  for (py::ssize_t d = info->ndim - 1; d >= 0; --d) {
    if (info->strides[d] != expected) compact = false;
    expected *= info->shape[d];
  }
  const auto* base = static_cast<const uint8_t*>(info->ptr);
  if (compact) {
    p.data = base;
  } else {  // a view (transposed, sliced, flipped): copied element by element
    p.owned.resize(static_cast<size_t>(expected));
    std::vector<py::ssize_t> index(info->ndim, 0);
    for (size_t k = 0; k < p.owned.size(); ++k) {
      py::ssize_t offset = 0;
      for (py::ssize_t d = 0; d < info->ndim; ++d) offset += index[d] * info->strides[d];
      p.owned[k] = base[offset];
      for (py::ssize_t d = info->ndim - 1; d >= 0; --d) {
        if (++index[d] < info->shape[d]) break;
        index[d] = 0;
      }
    }
    p.data = p.owned.data();
  }
  inputs.buffers.push_back(std::move(info));
  return p;
}

// One image (or one video frame): a path, a PIL image or an HxWx3 array.
Pixels image_pixels(const py::handle& value, const std::string& label, Inputs& inputs) {
  if (is_path(value)) {
    Pixels p;
    p.file = path_of(value);
    return p;
  }
  if (is_pil_image(value)) return pil_pixels(value);
  if (is_buffer(value)) return array_pixels(value, 3, label, inputs);
  raise_input(label + ": expected a path, a PIL.Image or an HxWx3 uint8 array, got " +
              type_name(value));
}

// The argument as a list of items: None is none; a single item (a path, an
// image, an array) is refused, so that a string is never read letter by letter.
py::list items_of(const py::object& arg, const char* name) {
  if (arg.is_none()) return py::list();
  if (is_path(arg) || is_pil_image(arg) || is_buffer(arg) || py::isinstance<py::bytes>(arg))
    throw py::type_error(std::string(name) + " takes a list of items; wrap a single one: " + name +
                         "=[x]");
  if (!py::isinstance<py::list>(arg) && !py::isinstance<py::tuple>(arg))
    throw py::type_error(std::string(name) + " must be a list or tuple, not " + type_name(arg));
  return py::list(arg);
}

std::string in_quotes(const std::string& file) {
  return " ('" + file + "')";
}

void check_size(const std::string& label, int64_t frames, int64_t height, int64_t width,
                const host::LimitsConfig& limits) {
  if (height > limits.max_image_pixels / width)
    raise_input(label + ": " + std::to_string(height) + "x" + std::to_string(width) +
                " pixels exceed limits.max_image_pixels (" +
                std::to_string(limits.max_image_pixels) +
                "); downscale the image or raise limits.max_image_pixels");
  if (frames > limits.max_frames_per_video)
    raise_input(label + ": " + std::to_string(frames) + " frames exceed " +
                "limits.max_frames_per_video (" + std::to_string(limits.max_frames_per_video) +
                "); sample fewer frames or raise limits.max_frames_per_video");
}

// A file part's pixels, decoded; the error names the item.
host::DecodedImage decode_file(const std::string& file, const std::string& label,
                               const host::LimitsConfig& limits) {
  try {
    return host::decode_image(file, limits.max_image_pixels);
  } catch (const Error& e) {
    throw Error(e.kind(), label + ": " + e.what());
  }
}

}  // namespace

Inputs read_inputs(const py::object& images, const py::object& videos) {
  Inputs inputs;
  const py::list image_list = items_of(images, "images");
  const py::list video_list = items_of(videos, "videos");
  for (size_t i = 0; i < image_list.size(); ++i) {
    Source s;
    s.modality = EG_MODALITY_IMAGE;
    s.label = "images[" + std::to_string(i) + "]";
    s.parts.push_back(image_pixels(image_list[i], s.label, inputs));
    if (!s.parts[0].file.empty()) s.label += in_quotes(s.parts[0].file);
    inputs.sources.push_back(std::move(s));
  }
  for (size_t i = 0; i < video_list.size(); ++i) {
    const py::handle v = video_list[i];
    Source s;
    s.modality = EG_MODALITY_VIDEO;
    s.label = "videos[" + std::to_string(i) + "]";
    if (is_path(v)) {
      s.video_file = path_of(v);
      if (!video_files_supported())
        raise_input(s.label + in_quotes(s.video_file) +
                    ": this build reads no video files; pass the video as a list of frames "
                    "(paths, PIL images or HxWx3 arrays) or a TxHxWx3 uint8 array");
      s.label += in_quotes(s.video_file);
    } else if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
      const py::list frames(py::reinterpret_borrow<py::object>(v));
      if (frames.empty()) raise_input(s.label + ": a video needs at least one frame");
      for (size_t f = 0; f < frames.size(); ++f)
        s.parts.push_back(image_pixels(frames[f], s.label + " frame " + std::to_string(f), inputs));
    } else if (is_buffer(v)) {
      s.parts.push_back(array_pixels(v, 4, s.label, inputs));
    } else {
      raise_input(s.label + ": expected a video file path, a list of frames or a TxHxWx3 uint8 " +
                  "array, got " + type_name(v));
    }
    inputs.sources.push_back(std::move(s));
  }
  return inputs;
}

ItemPixels load_pixels(const Source& source, const host::HostConfig& config) {
  const host::LimitsConfig& limits = config.limits;
  ItemPixels out;
  if (!source.video_file.empty()) {
    out.decoded = decode_video_path(source.video_file, config, source.label);
  } else if (source.parts.size() == 1 && source.parts[0].file.empty()) {
    const Pixels& p = source.parts[0];  // in place: one array or PIL image
    check_size(source.label, p.frames, p.height, p.width, limits);
    out.data = p.data;
    out.frames = p.frames;
    out.height = p.height;
    out.width = p.width;
    return out;
  } else {
    host::DecodedImage& joined = out.decoded;
    joined.frames = 0;
    for (size_t f = 0; f < source.parts.size(); ++f) {
      const Pixels& p = source.parts[f];
      const std::string label = source.modality == EG_MODALITY_VIDEO
                                    ? source.label + " frame " + std::to_string(f)
                                    : source.label;
      host::DecodedImage file;
      if (!p.file.empty()) file = decode_file(p.file, label, limits);
      const int64_t h = p.file.empty() ? p.height : file.height;
      const int64_t w = p.file.empty() ? p.width : file.width;
      const uint8_t* data = p.file.empty() ? p.data : file.pixels.data();
      if (f == 0) {
        joined.height = h, joined.width = w;
      } else if (h != joined.height || w != joined.width) {
        raise_input(label + " is " + std::to_string(h) + "x" + std::to_string(w) +
                    " but frame 0 is " + std::to_string(joined.height) + "x" +
                    std::to_string(joined.width) +
                    "; every frame of a video must have the same size");
      }
      check_size(label, 1, h, w, limits);
      joined.frames += p.frames;
      check_size(source.label, joined.frames, h, w, limits);
      const size_t bytes = static_cast<size_t>(p.frames * h * w * 3);
      joined.pixels.insert(joined.pixels.end(), data, data + bytes);
    }
  }
  out.data = out.decoded.pixels.data();
  out.frames = out.decoded.frames;
  out.height = out.decoded.height;
  out.width = out.decoded.width;
  return out;
}

}  // namespace encgraph::python
