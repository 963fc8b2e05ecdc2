// `ctpipe hang-report DIR`: collates the files a job's processes wrote where it hung or failed
// (ctpipe/exec/detail/hang_record.hpp: process-P.json on an event, process-P.live as it ran)
// against the table they ran, and names the first task that never completed, and why.
#pragma once

#include <iosfwd>
#include <string>

namespace CLI {
class App;
}

namespace ctpipe::explorer {

/// Adds the `hang-report` command to `app`; its folder and format go to `dir` and `format`.
CLI::App* add_hang_report_command(CLI::App& app, std::string& dir, std::string& format);

/// Writes the report on `out` ("text", "json", or "trace": Chrome trace events of the table's
/// replay with each task marked ran, never completed, waiting here or not reached); throws format_error (exit code 2)
/// on a folder without such files, or files that are not the hang report's or not of one job.
void hang_report(const std::string& dir, const std::string& format, std::ostream& out);

}  // namespace ctpipe::explorer
