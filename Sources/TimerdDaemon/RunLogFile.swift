import Dispatch
import Glibc
import TimerdCore
import TimerdEngine
import TimerdSystem

/// `log_file`: a job's runs' output appended to a file of its own, each run between a header and a trailer
/// line, the file rotated once it has reached `log_max_size` (`PATH.1` … `PATH.N`, `log_keep` of them).
///
/// Everything happens on one queue of its own, in the order the run hands it over: a disk that stalls
/// holds up the log files, never the runs' lane (`QueueExecutor.core`). A file that cannot be written is
/// said once per run in timerd's log, and the run goes on.
final class RunLogFile: @unchecked Sendable {
    /// Where every run's log file is written (the state below is only touched there).
    static let queue = DispatchQueue(label: "timerd.logfiles")

    struct Settings: Sendable, Equatable {
        var path: String
        var maxSize: Int
        var keep: Int
    }

    private let settings: Settings
    private let log: Logger
    private let job: String
    private let run: Int
    // On `queue` only.
    private var fd: FileDescriptor?
    private var failed = false

    /// Opens the file (after rotating it if it is full) and writes the run's header.
    init(_ settings: Settings, job: String, run: Int, started: WallTime, log: Logger) {
        self.settings = settings
        self.log = log
        self.job = job
        self.run = run
        Self.queue.async { [self] in
            rotateIfFull()
            do throws(Errno) {
                fd = try FileDescriptor.open(settings.path, .writeOnly, options: [.create, .append], permissions: 0o640)
            } catch {
                return fail("cannot open", error)
            }
            write(Array("==> job=\(job) run=\(run) started \(RFC3339.format(started)) <==\n".utf8))
        }
    }

    /// Appends output as the run wrote it.
    func append(_ bytes: [UInt8]) {
        Self.queue.async { [self] in write(bytes) }
    }

    /// Writes the trailer (`==> job=… run=… ended …: ok (exited with status 0) <==`) and closes the file.
    func end(_ outcome: RunOutcome) {
        Self.queue.async { [self] in
            let line = "==> job=\(job) run=\(run) ended \(RFC3339.format(outcome.finishedWall)): "
                + "\(outcome.result.rawValue) (\(outcome.reason)) <==\n"
            write(Array(line.utf8))
            try? fd?.close()
            fd = nil
        }
    }

    private func write(_ bytes: [UInt8]) {
        guard let fd, !failed, !bytes.isEmpty else { return }
        do throws(Errno) { try fd.writeAll(bytes) } catch { fail("cannot write", error) }
    }

    /// `PATH` → `PATH.1` → … → `PATH.keep` (the oldest is overwritten) once `PATH` has reached the size;
    /// with `keep` 0 it is emptied.
    private func rotateIfFull() {
        var info = stat()
        guard stat(settings.path, &info) == 0, Int(info.st_size) >= settings.maxSize else { return }
        if settings.keep == 0 {
            try? FileSystem.unlink(settings.path)
            return
        }
        for index in stride(from: settings.keep - 1, through: 1, by: -1) {
            try? FileSystem.rename("\(settings.path).\(index)", to: "\(settings.path).\(index + 1)")
        }
        do throws(Errno) { try FileSystem.rename(settings.path, to: settings.path + ".1") } catch { fail("cannot rotate", error) }
    }

    private func fail(_ what: String, _ error: Errno) {
        guard !failed else { return }
        failed = true
        log.warning(job: job, run: run, "log_file: \(what) \(settings.path): \(error); this run's output is not in it")
    }
}
