import TimerdConfig
import TimerdCore
import TimerdHost
import TimerdProtocol
import TimerdSystem

/// `timerctl import crontab`: reads the crontab (or a `/etc/cron.*` directory), prints the config
/// ``CrontabImport`` makes of it. Needs no daemon.
enum ImportCommand {
    /// Status 0, or 1 when a line was left out (0 with `--force`) or the file cannot be read (nothing
    /// printed then); 2 for `--user` with the system format.
    static func run(path: String, _ options: [Option], context: Timerctl.Context) -> Int32 {
        let user = options.last { $0.key == "user" }?.value
        let force = options.contains { $0.key == "force" }
        let system = options.contains { $0.key == "system" } || isSystemCrontab(path)
        if system, user != nil {
            context.stderr(HelpText.usageError(UsageError(
                "--user is for a per-user crontab; \(path == "-" ? "a system crontab" : path) names the user of each job", verb: .import)))
            return ExitStatus.usage
        }
        let importer = CrontabImport(fileSystem: DiskConfigFileSystem()) { name in
            (try? UserAccount.lookup(name: name))??.home
        }
        let result: CrontabImport.Result
        if path != "-", FileSystem.isDirectory(path) {
            guard let converted = importer.convertDirectory(path) else {
                context.stderr("\(path): is a directory (of the directories only /etc/cron.hourly, cron.daily, cron.weekly and cron.monthly can be imported)\n")
                return ExitStatus.daemonError
            }
            result = converted
        } else {
            let shown = path == "-" ? "<stdin>" : path
            let bytes: [UInt8]
            do {
                bytes = try FileSystem.readFile(path == "-" ? "/dev/stdin" : path)
            } catch {
                context.stderr("\(shown): cannot read: \(error)\n")
                return ExitStatus.daemonError
            }
            guard let text = String(validating: bytes, as: UTF8.self), !bytes.contains(0) else {
                context.stderr("\(shown): not a text file (not UTF-8, or a NUL byte)\n")
                return ExitStatus.daemonError
            }
            result = importer.convert(text, from: CrontabImport.Source(path: shown, system: system, user: user))
        }
        context.stdout(result.config)
        if !result.diagnostics.isEmpty {
            context.stderr(result.diagnostics.map { "\($0)\n" }.joined())
            let count = result.leftOut == 1 ? "1 line" : "\(result.leftOut) lines"
            context.stderr("timerctl: \(count) left out (kept as comments)\(force ? "" : "; --force exits 0 all the same")\n")
            if !force { return ExitStatus.daemonError }
        }
        return ExitStatus.success
    }

    /// `timerctl import systemd`: status 0, or 1 when a setting was left out (0 with `--force`) or a unit
    /// or its service cannot be read (whatever `--force` says).
    static func runSystemd(units: [String], _ options: [Option], context: Timerctl.Context) -> Int32 {
        let force = options.contains { $0.key == "force" }
        var importer = SystemdImport(fileSystem: DiskConfigFileSystem()) { name in
            (try? UserAccount.lookup(name: name))??.home
        }
        if let directory = options.last(where: { $0.key == "unit_path" })?.value { importer.unitPath = [directory] }
        let result = importer.convert(units)
        context.stdout(result.config)
        context.stderr((result.errors + result.diagnostics).map { "\($0)\n" }.joined())
        if !result.diagnostics.isEmpty {
            let count = result.leftOut == 1 ? "1 setting" : "\(result.leftOut) settings"
            context.stderr("timerctl: \(count) left out (kept as comments)\(force ? "" : "; --force exits 0 all the same")\n")
        }
        if !result.errors.isEmpty || (!result.diagnostics.isEmpty && !force) { return ExitStatus.daemonError }
        return ExitStatus.success
    }

    /// `/etc/crontab` and the files of `/etc/cron.d` have a user field.
    static func isSystemCrontab(_ path: String) -> Bool {
        path == "/etc/crontab" || (path.hasPrefix("/etc/cron.d/") && path.count > "/etc/cron.d/".count)
    }
}
