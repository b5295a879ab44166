// Checks a plugin candidate before anything loads it, without running its code:
// that it is a regular file, and that its ELF header describes a 64-bit,
// little-endian shared library for this machine whose tables and loadable
// segments lie inside the file. dlopen trusts the file: a truncated library
// faults (SIGBUS) inside the dynamic loader, and a foreign architecture comes
// back as a misleading "No such file or directory".
#pragma once

#include <filesystem>
#include <string>

namespace encgraph {

// Why `file` cannot be a plugin for this process (no file prefix, ends with the
// fix), or an empty string when the checks pass.
std::string elf_problem(const std::filesystem::path& file);

// "x86-64", "AArch64", ...: the ELF e_machine values a plugin is likely to carry;
// others read "machine <n>".
std::string elf_machine_name(unsigned machine);

// The e_machine value of the code this library was compiled to.
unsigned this_elf_machine();

}  // namespace encgraph
