import TimerdConfig
import TimerdCore

/// `timerctl import crontab`: a crontab(5) file as timerd config text, each job firing when cron would
/// fire it and running what cron would run. Pure: users' home directories come from `home`, and each job
/// written is read back by timerd's own ``ConfigLoader`` (with `fileSystem` saying which users and zones
/// exist), so what is printed passes `timerd --check-config`; a line that cannot be written exactly is
/// kept as a comment that says why, and counted in ``Result/leftOut``.
struct CrontabImport {
    /// Where the crontab came from and how to read it.
    struct Source {
        /// The path as given (`<stdin>` for `-`), for the header and the `FILE:LINE:` messages.
        var path: String
        /// The system format: a user field after the schedule (`/etc/crontab`, `/etc/cron.d/*`).
        var system: Bool
        /// `--user`: who runs a per-user crontab's jobs.
        var user: String?
    }

    struct Result: Equatable {
        var config: String
        /// `FILE:LINE: message`, one for each line left out.
        var diagnostics: [String]
        var leftOut: Int { diagnostics.count }
    }

    /// cron's `PATH` when the crontab sets none (`_PATH_DEFPATH`).
    static let cronPath = "/usr/bin:/bin"

    var fileSystem: any ConfigFileSystem
    /// A user's home directory, where cron runs the user's jobs; nil if unknown.
    var home: (String) -> String?

    /// Converts the text of a crontab.
    func convert(_ text: String, from source: Source) -> Result {
        var writer = Writer(importer: self, path: source.path)
        writer.header(source)
        var shell = "/bin/sh"
        var timezone: String?
        var env: [KeyValue] = []
        func set(_ name: String, _ value: String) {
            if let index = env.firstIndex(where: { $0.key == name }) { env[index].value = value } else { env.append(KeyValue(name, value)) }
        }
        for (offset, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = offset + 1
            switch Crontab.parse(raw, system: source.system) {
            case .blank:
                writer.flushComments()
            case .comment(let comment):
                writer.comments.append(comment)
            case .bad(let message):
                writer.leaveOut(line: number, raw, message)
            case .variable(let name, let value):
                switch name {
                case "MAILTO", "MAILFROM":
                    writer.comments.append(
                        "# \(name)=\(value): timerd sends no mail (a run's output is in 'timerctl show' and the log); "
                            + "give a job on_failure = URL or command to be told when it fails (docs/webhooks.md)")
                case "CRON_TZ":
                    timezone = value
                case "SHELL":
                    shell = value
                    set(name, value)
                    if value != "/bin/sh" {
                        writer.comments.append("# SHELL=\(value): timerd runs commands with /bin/sh; the jobs below run theirs with \(value) -c")
                    }
                case "TZ":
                    timezone = value
                    set(name, value)
                default:
                    set(name, value)
                }
            case .job(let entry):
                let user = entry.user ?? source.user
                var jobEnv = env
                if !env.contains(where: { $0.key == "PATH" }) { jobEnv.insert(KeyValue("PATH", Self.cronPath), at: 0) }
                let cwd = env.first(where: { $0.key == "HOME" })?.value ?? user.flatMap(home)
                var job = Job(
                    base: JobNames.base(forCommand: entry.command), schedule: entry.schedule, timezone: timezone, user: user,
                    cwd: cwd, env: jobEnv, action: Self.action(entry, shell: shell))
                // A command a config value cannot hold as it is (a trailing backslash or blank) goes to /bin/sh as an argument.
                job.fallback = .argv(["/bin/sh", "-c", entry.command])
                writer.add(job, line: number, raw)
            }
        }
        writer.flushComments()
        return writer.result
    }

    /// One of `/etc/cron.{hourly,daily,weekly,monthly}`: a job that runs `run-parts --report DIR` when
    /// Debian's `/etc/crontab` does, catching up a missed run as anacron does (`misfire = once`); nil for
    /// another directory.
    func convertDirectory(_ path: String) -> Result? {
        let name = path.split(separator: "/").last.map(String.init) ?? ""
        let schedules = ["cron.hourly": "17 * * * *", "cron.daily": "25 6 * * *", "cron.weekly": "47 6 * * 7", "cron.monthly": "52 6 1 * *"]
        guard let schedule = schedules[name] else { return nil }
        var writer = Writer(importer: self, path: path)
        writer.lines.append("# The scripts in \(path), run by run-parts as Debian's /etc/crontab runs them (as root, in /, with its PATH);")
        writer.lines.append("# misfire = once runs a run missed while the machine was off once at start-up, as anacron does.")
        var job = Job(
            base: name, schedule: schedule, timezone: nil, user: nil, cwd: "/",
            env: [KeyValue("PATH", "/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin")],
            action: .shell("run-parts --report " + ShellQuote.word(path)))
        job.misfireOnce = true
        writer.add(job, line: 0, Substring(path))
        return writer.result
    }

    /// The command as cron runs it: by SHELL, with its standard input from a `printf`.
    static func action(_ entry: Crontab.Entry, shell: String) -> Action {
        if let stdin = entry.stdin {
            return .shell("printf " + ShellQuote.word(ShellQuote.printfFormat(stdin)) + " | " + ShellQuote.word(shell) + " -c " + ShellQuote.word(entry.command))
        }
        return shell == "/bin/sh" ? .shell(entry.command) : .argv([shell, "-c", entry.command])
    }

    /// A job to write.
    struct Job {
        var base: String
        var schedule: String
        var timezone: String?
        var user: String?
        var cwd: String?
        var env: [KeyValue]
        var action: Action
        var fallback: Action?
        var misfireOnce = false

        /// The section's keys, for `name`.
        func section(_ name: String, action: Action) -> [String] {
            var lines = ["[job \"\(name)\"]", "cron = \(schedule)"]
            if let timezone { lines.append("timezone = \(timezone)") }
            if misfireOnce { lines.append("misfire = once") }
            if let user { lines.append("user = \(user)") }
            if let cwd { lines.append("cwd = \(cwd)") }
            lines += env.map { "env = \($0.key)=\($0.value)" }
            switch action {
            case .shell(let command): lines.append("command = \(command)")
            case .argv(let words): lines.append("argv = " + words.map(Words.quote).joined(separator: " "))
            case .webhook: preconditionFailure("an imported job runs a command")
            }
            return lines
        }

        /// Why the loaded job is not this one, or nil when it is.
        func difference(_ spec: JobSpec, action: Action) -> String? {
            if case .cron(let expression) = spec.schedule, expression.text == schedule {} else { return "the schedule changes" }
            if spec.action != action { return "a config value cannot hold the command exactly" }
            if let lost = env.first(where: { !spec.env.contains($0) }) {
                return "\(lost.key)=\"\(lost.value)\" cannot be a config value as it is (it would lose blanks at either end or a trailing backslash)"
            }
            if spec.timezone != timezone { return "the time zone changes" }
            if spec.cwd != cwd { return "a config value cannot hold the home directory \(cwd ?? "") exactly" }
            if spec.user != user { return "the user changes" }
            return nil
        }
    }

    /// The output, built line by line.
    struct Writer {
        let importer: CrontabImport
        let path: String
        var lines: [String] = []
        /// Comments waiting for the job they precede.
        var comments: [String] = []
        var names = JobNames()
        var diagnostics: [String] = []

        var result: Result { Result(config: lines.joined(separator: "\n") + "\n", diagnostics: diagnostics) }

        mutating func header(_ source: Source) {
            lines.append("# timerd jobs imported from \(source.path) by timerctl import crontab.")
            if !source.system && source.user == nil {
                lines.append("# They run as timerd's own user (root under systemd) in /; cron runs them as the crontab's owner in their")
                lines.append("# home directory: give --user NAME to do the same.")
            }
        }

        mutating func flushComments() {
            if !comments.isEmpty {
                lines.append("")
                lines += comments
                comments.removeAll()
            }
        }

        /// A blank line, then the comments that precede what comes next.
        private mutating func startSection() {
            if comments.isEmpty { lines.append("") } else { flushComments() }
        }

        mutating func leaveOut(line: Int, _ raw: Substring, _ why: String) {
            startSection()
            lines += ["# timerctl import: left out line \(line): \(why):", "#\t" + raw]
            diagnostics.append("\(path):\(line): \(why)")
        }

        mutating func add(_ job: Job, line: Int, _ raw: Substring) {
            let name = names.next(job.base)
            var failure = ""
            for action in [job.action] + (job.fallback.map { [$0] } ?? []) {
                let section = job.section(name, action: action)
                switch check(section, name: name) {
                case .success(let spec):
                    guard let difference = job.difference(spec, action: action) else {
                        startSection()
                        lines += section
                        return
                    }
                    failure = difference
                case .failure(let message):
                    failure = message.message
                }
            }
            names.release(name)
            leaveOut(line: line, raw, failure)
        }

        /// The job as timerd loads it, or the loader's first message.
        private func check(_ section: [String], name: String) -> Swift.Result<JobSpec, CheckFailure> {
            do {
                let configuration = try ConfigLoader.parse(section.joined(separator: "\n") + "\n", path: "/import.conf", fileSystem: importer.fileSystem)
                guard let job = configuration.jobs.first else { return .failure(CheckFailure(message: "no job")) }
                return .success(job.spec)
            } catch {
                return .failure(CheckFailure(message: error.diagnostics.first?.message ?? "invalid"))
            }
        }
    }

    struct CheckFailure: Error {
        var message: String
    }
}
