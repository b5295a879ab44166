// The wrapper every exported plugin function body runs in: no exception may
// cross the C boundary, so each is caught here and becomes a status + message.
#pragma once

#include <encoder_kit/error.hpp>

#include <cstdio>
#include <exception>
#include <new>
#include <string>

namespace encoder_kit {

inline void set_error(eg_error* err, const std::string& message) {
  if (err) std::snprintf(err->message, sizeof(err->message), "%s", message.c_str());
}

template <class Fn>
eg_status guarded(eg_error* err, Fn&& fn) noexcept {
  try {
    fn();
    return EG_OK;
  } catch (const Error& e) {
    set_error(err, e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_error(err, "out of host memory");
    return EG_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_error(err, e.what());
    return EG_ERR_INTERNAL;
  } catch (...) {
    set_error(err, "unknown exception");
    return EG_ERR_INTERNAL;
  }
}

}  // namespace encoder_kit
