#pragma once
// CLI11, without the static initialiser that <iostream> puts in every file including it.
//
// CLI11's App.hpp includes <iostream> for App::exit's default streams (std::cout, std::cerr) and
// the warnings of deprecated or retired options (deprecate_option, retire_option: gpulane uses
// neither; whoever does must call StandardStreams() at the start of main). In libstdc++ 12 that
// include gives each file a static std::ios_base::Init, which at every start of gpulane constructs
// the eight standard streams and C++'s classic locale (some 30 facets): about 20 of the page faults
// a `gpulane --version` took, each dear on a virtual machine
// (bench/results/cli-start-lazy-streams-2026-12-06.md). gpulane writes through stdio (fmt), never
// std::cout, so built with GPULANE_LAZY_IOSTREAM (the gpulane executable only) the streams are
// declared here instead of through <iostream>, and constructed by StandardStreams() where they are
// used: before App::exit (--help, --help-all, --version with other words). Anything else that
// would use std::cout or std::cerr must call StandardStreams() first. Elsewhere (tests, other
// standard libraries) this is plain <CLI/CLI.hpp>.
#if defined(GPULANE_LAZY_IOSTREAM) && defined(__GLIBCXX__) && !defined(_GLIBCXX_IOSTREAM)
#include <istream>
#include <ostream>
#define _GLIBCXX_IOSTREAM 1  // <iostream>'s guard: its declarations below, not its Init object
namespace std {
extern istream cin;
extern ostream cout;
extern ostream cerr;
extern ostream clog;
extern wistream wcin;
extern wostream wcout;
extern wostream wcerr;
extern wostream wclog;
}  // namespace std
#define GPULANE_STREAMS_LAZY 1
#endif
#include <CLI/CLI.hpp>

namespace gpulane::cli {

/// Constructs std::cout, std::cerr and the rest once (as <iostream>'s static object would have
/// before main) and flushes them at exit; call it before anything writes to them.
inline void StandardStreams() {
#ifdef GPULANE_STREAMS_LAZY
  static std::ios_base::Init init;
#endif
}

}  // namespace gpulane::cli
