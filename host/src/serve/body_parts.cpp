#include "serve/body_parts.hpp"

namespace encgraph::host::serve {

void BodyParts::add(std::string text) {
  if (text.empty()) return;
  auto owned = std::make_shared<const std::string>(std::move(text));
  const void* data = owned->data();
  const size_t size = owned->size();
  parts.push_back({std::move(owned), data, size});
}

void BodyParts::add(std::shared_ptr<const void> owner, const void* data, size_t size) {
  if (size > 0) parts.push_back({std::move(owner), data, size});
}

size_t BodyParts::size() const {
  size_t total = 0;
  for (const BodyPart& p : parts) total += p.size;
  return total;
}

std::string BodyParts::text() const {
  std::string out;
  out.reserve(size());
  for (const BodyPart& p : parts) out.append(static_cast<const char*>(p.data), p.size);
  return out;
}

}  // namespace encgraph::host::serve
