import TimerdConfig
import TimerdCore

/// `timerctl import systemd`: systemd timer units and their services as timerd config text, each job
/// firing when the timer would and running what the service would run. Pure: files come from
/// `fileSystem`; every key written is read back by timerd's own ``ConfigLoader``, and a setting that
/// cannot be written exactly is kept as a comment that says why, counted in ``Result/leftOut``.
struct SystemdImport {
    struct Result: Equatable {
        var config: String
        /// `FILE:LINE: message`, one for each setting left out.
        var diagnostics: [String]
        /// Units that could not be read at all (nothing printed for them).
        var errors: [String]
        var leftOut: Int { diagnostics.count }
    }

    /// Where a bare unit name is looked up, in this order (systemd's unit path for the system manager).
    static let defaultUnitPath = ["/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"]

    var fileSystem: any ConfigFileSystem
    /// `--unit-path DIR`, or ``defaultUnitPath``.
    var unitPath: [String] = Self.defaultUnitPath
    /// A user's home directory, for `%h` and `WorkingDirectory=~`; nil if unknown.
    var home: (String) -> String?

    /// Converts each timer (a path, or a unit name looked up in ``unitPath``).
    func convert(_ timers: [String]) -> Result {
        var writer = Writer(fileSystem: fileSystem)
        writer.lines.append("# timerd jobs imported from systemd timer units by timerctl import systemd.")
        for argument in timers {
            let path = argument.hasSuffix(".timer") || argument.contains("/") ? argument : argument + ".timer"
            let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : nil
            let timerName = SystemdUnit.basename(path)
            // A path that is not there (or not readable) is said by load, with the reason.
            guard let timerFile = locate(timerName, in: directory.map { [$0] } ?? unitPath) ?? directory.map({ _ in (path, false) }) else {
                writer.errors.append("\(argument): no such timer unit in \(unitPath.joined(separator: ", "))")
                continue
            }
            let timer: SystemdUnit
            switch SystemdUnit.load(timerFile.path, name: timerName, fileSystem: fileSystem) {
            case .success(let unit): timer = unit
            case .failure(let error):
                writer.errors.append(error.message)
                continue
            }
            let serviceName = timer.last("Timer", "Unit")?.value ?? timer.stem + ".service"
            guard let serviceFile = locate(serviceName, in: directory.map { [$0] } ?? unitPath) else {
                writer.errors.append("\(serviceName): no such service unit in \(directory ?? unitPath.joined(separator: ", ")) (the service of \(timer.name))")
                continue
            }
            let servicePath = serviceFile.path
            let service: SystemdUnit
            switch SystemdUnit.load(servicePath, name: serviceName, fileSystem: fileSystem) {
            case .success(let unit): service = unit
            case .failure(let error):
                writer.errors.append(error.message + " (the service of \(timer.name))")
                continue
            }
            var conversion = UnitConversion(importer: self, timer: timer, service: service)
            conversion.write(into: &writer)
        }
        return writer.result
    }

    /// The file of unit `name`: the first of `directories` that has it, else, for an instance
    /// (`backup@home.timer`), the first that has its template (`backup@.timer`), as systemd looks them up.
    private func locate(_ name: String, in directories: [String]) -> (path: String, template: Bool)? {
        var names = [(name, false)]
        if let at = name.firstIndex(of: "@"), let dot = name.lastIndex(of: "."), name.index(after: at) < dot {
            names.append((String(name[...at]) + String(name[dot...]), true))
        }
        for (candidate, template) in names {
            for directory in directories {
                let path = directory.hasSuffix("/") ? directory + candidate : directory + "/" + candidate
                if (try? fileSystem.read(path)) != nil { return (path, template) }
            }
        }
        return nil
    }

    /// The output, built unit by unit.
    struct Writer {
        var fileSystem: any ConfigFileSystem
        var lines: [String] = []
        var names = JobNames()
        var diagnostics: [String] = []
        var errors: [String] = []

        var result: Result { Result(config: lines.joined(separator: "\n") + "\n", diagnostics: diagnostics, errors: errors) }

        /// The section as timerd loads it, or the loader's first message.
        func check(_ section: [String]) -> Swift.Result<JobSpec, CrontabImport.CheckFailure> {
            do {
                let configuration = try ConfigLoader.parse(section.joined(separator: "\n") + "\n", path: "/import.conf", fileSystem: fileSystem)
                guard let job = configuration.jobs.first else { return .failure(.init(message: "no job")) }
                return .success(job.spec)
            } catch {
                return .failure(.init(message: error.diagnostics.first?.message ?? "invalid"))
            }
        }
    }
}

/// One timer and its service, converted.
struct UnitConversion {
    let importer: SystemdImport
    let timer: SystemdUnit
    let service: SystemdUnit

    /// Comments before the job: notes, then what was left out.
    private var notes: [String] = []
    private var leftOut: [(origin: String, raw: String, why: String)] = []
    /// Keys after `[job "NAME"]` and the schedule: each (key, value, setting it came from).
    private var keys: [(key: String, value: String, from: SystemdUnit.Setting?)] = []

    init(importer: SystemdImport, timer: SystemdUnit, service: SystemdUnit) {
        self.importer = importer
        self.timer = timer
        self.service = service
    }

    /// Hardening and sandboxing settings: timerd runs jobs without them.
    static let sandboxing: Set<String> = [
        "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "PrivateNetwork", "PrivateUsers", "PrivateIPC",
        "PrivateMounts", "ProtectHostname", "ProtectClock", "ProtectKernelTunables", "ProtectKernelModules",
        "ProtectKernelLogs", "ProtectControlGroups", "ProtectProc", "ProcSubset", "LockPersonality",
        "MemoryDenyWriteExecute", "RestrictRealtime", "RestrictSUIDSGID", "RestrictNamespaces",
        "RestrictAddressFamilies", "SystemCallFilter", "SystemCallArchitectures", "SystemCallErrorNumber",
        "CapabilityBoundingSet", "AmbientCapabilities", "NoNewPrivileges", "ReadWritePaths", "ReadOnlyPaths",
        "InaccessiblePaths", "BindPaths", "BindReadOnlyPaths", "TemporaryFileSystem", "DevicePolicy", "DeviceAllow",
        "IPAddressDeny", "IPAddressAllow", "UMask", "KeyringMode", "RemoveIPC", "DynamicUser", "StateDirectory",
        "CacheDirectory", "LogsDirectory", "RuntimeDirectory", "ConfigurationDirectory",
    ]

    /// Resource settings and the job keys that take the same values.
    static let resources: [String: String] = [
        "Nice": "nice", "MemoryMax": "memory_max", "MemoryHigh": "memory_high", "MemorySwapMax": "memory_swap_max",
        "CPUQuota": "cpu_quota", "CPUWeight": "cpu_weight", "IOWeight": "io_weight", "TasksMax": "tasks_max",
        "OOMScoreAdjust": "oom_score_adj", "LimitFSIZE": "limit_fsize", "LimitDATA": "limit_data",
        "LimitSTACK": "limit_stack", "LimitCORE": "limit_core", "LimitRSS": "limit_rss", "LimitNOFILE": "limit_nofile",
        "LimitAS": "limit_as", "LimitNPROC": "limit_nproc", "LimitMEMLOCK": "limit_memlock", "LimitLOCKS": "limit_locks",
        "LimitSIGPENDING": "limit_sigpending", "LimitMSGQUEUE": "limit_msgqueue", "LimitNICE": "limit_nice",
        "LimitRTPRIO": "limit_rtprio", "LimitCPU": "limit_cpu",
    ]

    mutating func write(into writer: inout SystemdImport.Writer) {
        let base = JobNames.sanitize(Substring(timer.stem))
        let name = writer.names.next(base)
        notes.append("# \(timer.path) and \(service.path)")
        if name != timer.stem { notes.append("# (the job is named \(name): a job name cannot be \(timer.stem))") }
        for setting in timer.settings + service.settings where setting.section == "Unit" {
            switch setting.key {
            case "Description": if setting.unitName(in: timer) { notes.append("# " + setting.value) }
            case "Documentation": break
            default: leaveOut(setting, "timerd has no unit dependencies or conditions")
            }
        }
        if timer.settings.contains(where: { $0.section == "Install" }) {
            notes.append("# [Install]: a job runs by being in timerd's config; there is nothing to enable.")
        }
        let calendar = timerKeys()
        let action = serviceKeys()
        var lines: [String] = []
        if let calendar, let action {
            let actionLine = switch action {
            case .argv(let words): "argv = " + words.map(Words.quote).joined(separator: " ")
            case .shell(let command): "command = " + command
            case .webhook: preconditionFailure("an imported job runs a command")
            }
            var section = ["[job \"\(name)\"]", "calendar = \(calendar)", actionLine]
            switch writer.check(section) {
            case .failure(let failure):
                leaveOut(nil, "the job does not load in timerd: \(failure.message)")
                writer.names.release(name)
            case .success(let spec) where spec.action != action:
                leaveOut(nil, "a config value cannot hold the command exactly (a line break in it?): the unit is left out")
                writer.names.release(name)
            case .success:
                // Each further key alone, so one timerd refuses (or changes) is left out with the reason.
                for key in keys {
                    let line = "\(key.key) = \(key.value)"
                    switch writer.check(section + [line]) {
                    case .success(let spec):
                        if key.key == "env", let equals = key.value.firstIndex(of: "="),
                            !spec.env.contains(KeyValue(String(key.value[..<equals]), String(key.value[key.value.index(after: equals)...])))
                        {
                            leaveOut(key.from, "\(key.value) cannot be a config value as it is (blanks at either end, a trailing backslash or a line break)")
                        } else {
                            section.append(line)
                        }
                    case .failure(let failure): leaveOut(key.from, failure.message)
                    }
                }
                lines = section
            }
        } else {
            writer.names.release(name)
            if calendar == nil, action != nil { leaveOut(nil, "no OnCalendar= that timerd can express: the unit is left out") }
        }
        writer.lines.append("")
        writer.lines += notes
        for item in leftOut {
            writer.lines += ["# timerctl import: left out \(item.origin): \(item.why):", "#\t" + item.raw]
            writer.diagnostics.append("\(item.origin): \(item.why)")
        }
        writer.lines += lines
    }

    private mutating func leaveOut(_ setting: SystemdUnit.Setting?, _ why: String) {
        leaveOut(origin: setting?.origin ?? timer.path, raw: setting?.raw ?? timer.name, why)
    }

    private mutating func leaveOut(origin: String, raw: String, _ why: String) {
        leftOut.append((origin, raw, why))
    }

    private mutating func add(_ key: String, _ value: String, _ setting: SystemdUnit.Setting?) {
        keys.append((key, value, setting))
    }

    /// The `[Timer]` section: the schedule (the first OnCalendar=), and the keys that go with it.
    private mutating func timerKeys() -> String? {
        var calendar: String?
        let calendars = timer.values("Timer", "OnCalendar")
        for (index, setting) in calendars.enumerated() {
            if index == 0 {
                calendar = setting.value
            } else {
                leaveOut(setting,
                    "a timerd job has one schedule; a second job for this one could run at the same time as the first, where systemd runs the service once")
            }
        }
        for setting in timer.settings where setting.section == "Timer" {
            if !setting.key.hasPrefix("On"), timer.last("Timer", setting.key)?.origin != setting.origin { continue }
            switch setting.key {
            case "OnCalendar", "Unit": break
            case "OnBootSec", "OnStartupSec", "OnActiveSec":
                leaveOut(setting, "timerd's 'in' counts from timerd's start or a reload that changes the job, not from boot or the timer's start")
            case "OnUnitActiveSec", "OnUnitInactiveSec":
                leaveOut(setting, "this counts from the service's last start or stop; timerd's 'every' keeps a fixed grid from timerd's start")
            case "RandomizedDelaySec":
                add("jitter", setting.value, setting)
            case "FixedRandomDelay":
                if isTrue(setting.value) {
                    add("fixed_jitter", "yes", setting)
                    notes.append("# FixedRandomDelay=: timerd's fixed delay comes from the machine id and the job name, so it differs from systemd's")
                }
            case "AccuracySec":
                add("leeway", setting.value, setting)
            case "Persistent":
                if isTrue(setting.value) { add("misfire", "once", setting) }
            case "RemainAfterElapse" where isTrue(setting.value): break
            case "WakeSystem" where !isTrue(setting.value): break
            default:
                leaveOut(setting, "timerd has no equivalent of \(setting.key)=")
            }
        }
        if timer.last("Timer", "AccuracySec") == nil {
            notes.append("# systemd's default AccuracySec=1min lets it fire up to a minute late; timerd fires on time (leeway = 0)")
        }
        return calendar
    }

    /// The `[Service]` section: the action line (`argv = …` or `command = …`), and the keys that go with it.
    private mutating func serviceKeys() -> Action? {
        let type = service.last("Service", "Type")?.value ?? "simple"
        guard ["simple", "exec", "oneshot"].contains(type) else {
            leaveOut(service.last("Service", "Type"), "a timerd job runs a command until it exits; Type=\(type) is not that")
            return nil
        }
        let user = service.last("Service", "User")?.value
        let home = user == nil ? "/root" : user.flatMap(importer.home)
        let specifiers = SystemdWords.Specifiers(unitName: service.name, user: user, home: home)
        var commands: [SystemdUnit.Setting] = service.values("Service", "ExecStartPre") + service.values("Service", "ExecStart")
        if type == "oneshot" {
            commands += service.values("Service", "ExecStartPost")
        } else {
            for setting in service.values("Service", "ExecStartPost") {
                leaveOut(setting, "with Type=\(type) systemd runs it once the command has started, not after it ends")
            }
        }
        if service.values("Service", "ExecStart").count > 1 && type != "oneshot" {
            leaveOut(service.values("Service", "ExecStart")[1], "only Type=oneshot may have several ExecStart=")
            return nil
        }
        var shellCommands: [String] = []
        var argv: [String]?
        for setting in commands {
            do throws(SystemdWords.Unsupported) {
                let command = try self.command(setting.value, specifiers: specifiers, privileged: user != nil)
                shellCommands.append(command.shell)
                argv = commands.count == 1 ? command.argv : nil
            } catch {
                leaveOut(setting, error.message)
            }
        }
        guard !shellCommands.isEmpty else {
            if service.values("Service", "ExecStart").isEmpty { leaveOut(nil, "\(service.name) has no ExecStart=") }
            return nil
        }
        if let user { add("user", user, service.last("Service", "User")) }
        var env: [(String, String, SystemdUnit.Setting)] = []
        func set(_ name: String, _ value: String, _ setting: SystemdUnit.Setting) {
            if let index = env.firstIndex(where: { $0.0 == name }) { env[index] = (name, value, setting) } else { env.append((name, value, setting)) }
        }
        for setting in service.values("Service", "Environment") {
            do throws(SystemdWords.Unsupported) {
                for word in try SystemdWords.split(setting.value) {
                    let assignment = try specifiers.resolve(word)
                    guard let equals = assignment.firstIndex(of: "="), equals != assignment.startIndex else {
                        throw SystemdWords.Unsupported(message: "\(assignment) is not NAME=VALUE")
                    }
                    set(String(assignment[..<equals]), String(assignment[assignment.index(after: equals)...]), setting)
                }
            } catch {
                leaveOut(setting, error.message)
            }
        }
        for setting in service.values("Service", "EnvironmentFile") {
            let optional = setting.value.hasPrefix("-")
            let path = optional ? String(setting.value.dropFirst()) : setting.value
            guard let bytes = try? importer.fileSystem.read(path), let text = String(validating: bytes, as: UTF8.self) else {
                if !optional { leaveOut(setting, "\(path) cannot be read here (systemd would not start the service without it)") }
                continue
            }
            guard let assignments = Self.environmentFile(text) else {
                leaveOut(setting, "\(path) uses more of the format than plain NAME=VALUE lines and quotes")
                continue
            }
            notes.append("# EnvironmentFile=\(setting.value): its values now; systemd reads the file at each start")
            for (name, value) in assignments { set(name, value, setting) }
        }
        for (name, value, setting) in env { add("env", "\(name)=\(value)", setting) }
        for setting in service.settings where setting.section == "Service" {
            let value = setting.value
            // A single-valued setting: systemd takes its last assignment.
            if !setting.key.hasPrefix("Exec"), service.last("Service", setting.key)?.origin != setting.origin { continue }
            switch setting.key {
            case "Type", "ExecStart", "ExecStartPre", "ExecStartPost", "User", "Environment", "EnvironmentFile": break
            case "Group": add("group", value, setting)
            case "WorkingDirectory":
                if value == "~" {
                    if let home { add("cwd", home, setting) } else { leaveOut(setting, "the home directory of \(user ?? "root") is not known here") }
                } else if value.hasPrefix("-") || value.contains("%") {
                    leaveOut(setting, "timerd's cwd must exist and has no specifiers")
                } else {
                    add("cwd", value, setting)
                }
            case "TimeoutStartSec", "TimeoutSec":
                if type != "oneshot" {
                    leaveOut(setting, "with Type=\(type) it limits only the start-up, which timerd has no notion of")
                } else if value != "infinity" && value != "0" {
                    add("timeout", value, setting)
                    addKillGrace(setting)
                }
            case "RuntimeMaxSec":
                // systemd: no effect on Type=oneshot.
                if type != "oneshot" && value != "infinity" {
                    add("timeout", value, setting)
                    addKillGrace(setting)
                }
            case "TimeoutStopSec": break
            case "KillMode":
                if ["control-group", "mixed", "process"].contains(value) { add("kill_mode", value, setting) } else {
                    leaveOut(setting, "timerd's kill_mode is control-group, mixed or process")
                }
            case "SuccessExitStatus":
                if value.split(separator: " ").allSatisfy({ $0.allSatisfy(\.isNumber) }) {
                    add("success_exit_codes", (["0"] + value.split(separator: " ").map(String.init)).joined(separator: ","), setting)
                } else {
                    leaveOut(setting, "only exit statuses can be carried over, not signal names")
                }
            case "IOSchedulingClass", "IOSchedulingPriority": break
            case "StandardOutput" where ["journal", "inherit"].contains(value), "StandardError" where ["journal", "inherit"].contains(value):
                break
            case let key where Self.resources[key] != nil:
                add(Self.resources[key]!, value, setting)
            case let key where Self.sandboxing.contains(key):
                // `no` is systemd's default: nothing to leave out.
                if !isFalse(value) { leaveOut(setting, "timerd does not sandbox runs") }
            default:
                leaveOut(setting, "timerd has no equivalent of \(setting.key)=")
            }
        }
        let ioClass = service.last("Service", "IOSchedulingClass")
        let ioPriority = service.last("Service", "IOSchedulingPriority")
        if ioClass != nil || ioPriority != nil {
            let classNames = ["1": "realtime", "2": "best-effort", "3": "idle", "realtime": "realtime", "best-effort": "best-effort", "idle": "idle"]
            if let ioClass, classNames[ioClass.value] == nil {
                leaveOut(ioClass, "timerd's ionice classes are realtime, best-effort and idle")
            } else {
                let name = ioClass.map { classNames[$0.value]! } ?? "best-effort"
                add("ionice", name == "idle" ? name : name + (ioPriority.map { ":" + $0.value } ?? ""), ioClass ?? ioPriority)
            }
        }
        if let argv { return .argv(argv) }
        return .shell(shellCommands.joined(separator: " && "))
    }

    /// `kill_grace` for a timeout: `TimeoutStopSec=` (or `TimeoutSec=`), else systemd's default 90s.
    private mutating func addKillGrace(_ timeout: SystemdUnit.Setting) {
        let stop = service.settings.last { $0.section == "Service" && ($0.key == "TimeoutStopSec" || $0.key == "TimeoutSec") }
        if let stop, stop.value != "infinity" {
            add("kill_grace", stop.value, stop)
        } else {
            add("kill_grace", "90s", timeout)
            notes.append("# kill_grace = 90s: systemd's default TimeoutStopSec=, between SIGTERM and SIGKILL at the timeout")
        }
    }

    /// One command line: its prefixes applied, as a /bin/sh command, and as argv when it needs no shell.
    private func command(_ line: String, specifiers: SystemdWords.Specifiers, privileged: Bool) throws(SystemdWords.Unsupported)
        -> (shell: String, argv: [String]?)
    {
        var text = Substring(line)
        var ignoreFailure = false
        var expand = true
        while let first = text.first, "-@:+!".contains(first) {
            switch first {
            case "-": ignoreFailure = true
            case ":": expand = false
            case "@": throw SystemdWords.Unsupported(message: "@ sets the program's argv[0], which timerd cannot")
            default:
                if privileged {
                    throw SystemdWords.Unsupported(message: "\(first) runs this command with full privileges, the rest as User=; a timerd job has one user")
                }
            }
            text = text.dropFirst()
        }
        let words = try SystemdWords.split(String(text)).map { (word) throws(SystemdWords.Unsupported) in try specifiers.resolve(word) }
        guard !words.isEmpty else { throw SystemdWords.Unsupported(message: "an empty command") }
        let parts = try words.map { (word) throws(SystemdWords.Unsupported) in expand ? try SystemdWords.parts(word) : [.text(word)] }
        let plain = parts.allSatisfy { $0.count == 1 && { if case .text = $0[0] { true } else { false } }($0) }
        var shell = parts.map(SystemdWords.shellWord).joined(separator: " ")
        if ignoreFailure { shell = "{ \(shell) || :; }" }
        return (shell, plain && !ignoreFailure ? words : nil)
    }

    /// `NAME=VALUE` lines of an environment file (`#` comments, blank lines, values in `'…'` or `"…"`
    /// without escapes), or nil when it uses more of the format.
    static func environmentFile(_ text: String) -> [(String, String)]? {
        var result: [(String, String)] = []
        for raw in text.split(separator: "\n") {
            let line = String(raw).trimmingBlanks()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            guard let equals = line.firstIndex(of: "="), !line.contains("\\") else { return nil }
            let name = String(line[..<equals]).trimmingBlanks()
            var value = String(line[line.index(after: equals)...]).trimmingBlanks()
            guard !name.isEmpty, name.allSatisfy({ $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }) else { return nil }
            if let first = value.first, first == "'" || first == "\"" {
                guard value.count >= 2, value.last == first, !value.dropFirst().dropLast().contains(first) else { return nil }
                value = String(value.dropFirst().dropLast())
            } else if value.contains("'") || value.contains("\"") || value.contains("$") {
                return nil
            }
            result.append((name, value))
        }
        return result
    }

    private func isFalse(_ value: String) -> Bool {
        ["0", "no", "n", "false", "f", "off"].contains(value.lowercased())
    }

    private func isTrue(_ value: String) -> Bool {
        ["1", "yes", "y", "true", "t", "on"].contains(value.lowercased())
    }
}

extension SystemdUnit.Setting {
    /// True when this setting belongs to `unit` (its Description is the one shown).
    fileprivate func unitName(in unit: SystemdUnit) -> Bool {
        origin.hasPrefix(unit.path)
    }
}
