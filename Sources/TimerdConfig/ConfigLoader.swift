import TimerdCore

/// Reads config files into a `Configuration`, or every problem found as `file:line: message` diagnostics.
///
/// Never logs and never touches the disk itself: all file access goes through a `ConfigFileSystem`.
public enum ConfigLoader {
    /// The keys of a `[daemon]` section.
    public static let daemonKeys = ["socket", "max_running", "stop_grace", "log", "metrics_file", "metrics_interval", "include"]
        + AccessSettings.keys

    /// Loads the main config file at `path` and the files it includes.
    public static func load(path: String, fileSystem: some ConfigFileSystem) throws(ConfigErrors) -> Configuration {
        let main = ConfigPath.clean(path)
        let bytes: [UInt8]
        do {
            bytes = try fileSystem.read(main)
        } catch {
            throw ConfigErrors([Diagnostic(file: main, line: 0, message: "cannot read: \(error.reason)")])
        }
        return try load(mainPath: main, bytes: bytes, fileSystem: fileSystem)
    }

    /// `load(path:fileSystem:)`, but returning the outcome as a `Result`.
    public static func loadResult(path: String, fileSystem: some ConfigFileSystem) -> Result<Configuration, ConfigErrors> {
        Result { () throws(ConfigErrors) in try load(path: path, fileSystem: fileSystem) }
    }

    /// Parses `text` as the main config file at `path`; includes are looked up in `fileSystem`.
    public static func parse(_ text: String, path: String, fileSystem: some ConfigFileSystem) throws(ConfigErrors) -> Configuration {
        try load(mainPath: ConfigPath.clean(path), bytes: Array(text.utf8), fileSystem: fileSystem)
    }

    /// Parses `text` as a standalone main config file (any include finds nothing).
    public static func parse(_ text: String, path: String = "timerd.conf") throws(ConfigErrors) -> Configuration {
        try parse(text, path: path, fileSystem: InMemoryConfigFileSystem())
    }

    private static func load(mainPath: String, bytes: [UInt8], fileSystem: some ConfigFileSystem) throws(ConfigErrors) -> Configuration {
        var session = LoadSession(fileSystem: fileSystem, mainPath: mainPath)
        session.parseFile(path: mainPath, bytes: bytes, isMain: true)
        session.processIncludes()
        session.checkPools()
        session.checkChains()
        let diagnostics = session.sortedDiagnostics()
        guard diagnostics.isEmpty else { throw ConfigErrors(diagnostics) }
        return Configuration(settings: session.settings, jobs: session.jobs, files: session.files)
    }
}

/// The state of one load: what has been read so far and every problem found.
private struct LoadSession<FileSystem: ConfigFileSystem> {
    let fileSystem: FileSystem
    let mainPath: String
    var settings = DaemonSettings.defaults
    var jobs: [ConfiguredJob] = []
    var files: [String] = []
    /// First declaration of each job name, for duplicate reports.
    var declared: [JobName: String] = [:]
    /// `include` patterns of the main file, resolved, with their lines.
    var includes: [(pattern: String, line: Int)] = []
    private var diagnostics: [(rank: Int, sequence: Int, diagnostic: Diagnostic)] = []
    private var ranks: [String: Int] = [:]
    /// The line of the main file's `[daemon]` and `[cluster]` headers.
    private var mainSectionHeaders: [String: Int] = [:]

    init(fileSystem: FileSystem, mainPath: String) {
        self.fileSystem = fileSystem
        self.mainPath = mainPath
    }

    mutating func report(_ file: String, _ line: Int, _ message: String) {
        diagnostics.append((ranks[file] ?? Int.max, diagnostics.count, Diagnostic(file: file, line: line, message: message)))
    }

    func sortedDiagnostics() -> [Diagnostic] {
        diagnostics.sorted { ($0.rank, $0.diagnostic.line, $0.sequence) < ($1.rank, $1.diagnostic.line, $1.sequence) }
            .map(\.diagnostic)
    }

    // MARK: Files

    private enum Section: Equatable { case none, daemon, cluster, job, pool(String), ignored }

    mutating func parseFile(path: String, bytes: [UInt8], isMain: Bool) {
        ranks[path] = files.count
        files.append(path)
        let lexed = ConfigLexer.lex(bytes)
        for problem in lexed.problems { report(path, problem.line, problem.message) }

        var section = Section.none
        var job: JobBuilder?
        var daemonKeys: [String: Int] = [:]
        var clusterKeys: [String: Int] = [:]
        for line in lexed.lines {
            switch line.content {
            case .header(let inner):
                if let finished = job { finish(finished) }
                job = nil
                section = .ignored
                if inner == "daemon" || inner == "cluster" {
                    if mainFileSection(inner, file: path, line: line.number, isMain: isMain) {
                        section = inner == "daemon" ? .daemon : .cluster
                        if section == .cluster, settings.cluster == nil { settings.cluster = ClusterSettings() }
                    }
                } else if let pool = poolHeader(inner, file: path, line: line.number) {
                    section = .pool(pool)
                } else if inner.hasPrefix("pool") {
                    section = .ignored  // reported by poolHeader
                } else if let builder = jobHeader(inner, file: path, line: line.number) {
                    job = builder
                    section = .job
                }
            case .pair(let key, let value):
                switch section {
                case .none:
                    report(path, line.number, "key \"\(key)\" is outside any section (start with [daemon] or [job \"NAME\"])")
                    section = .ignored
                case .ignored:
                    break
                case .daemon:
                    daemonKey(key, value, file: path, line: line.number, seen: &daemonKeys)
                case .cluster:
                    clusterKey(key, value, file: path, line: line.number, seen: &clusterKeys)
                case .job:
                    job?.add(key, value, line: line.number, report: { report(path, $0, $1) })
                case .pool(let name):
                    poolKey(name, key, value, file: path, line: line.number)
                }
            }
        }
        if let finished = job { finish(finished) }
        if isMain, let clusterHeader = mainSectionHeaders["cluster"], settings.cluster?.endpoints.isEmpty == true,
           clusterKeys["etcd"] == nil {
            report(path, clusterHeader, "[cluster] needs etcd = http://HOST:2379,… (the etcd cluster the nodes share jobs through)")
        }
    }

    /// `[daemon]` and `[cluster]`: allowed only in the main file, and once (a repeat is reported and its
    /// keys still read). False when the section's keys are to be ignored.
    private mutating func mainFileSection(_ name: String, file: String, line: Int, isMain: Bool) -> Bool {
        guard isMain else {
            report(file, line, "[\(name)] is allowed only in the main config file (\(mainPath)); included files hold [job] sections")
            return false
        }
        if let first = mainSectionHeaders[name] {
            report(file, line, "[\(name)] is given more than once (first at line \(first))")
        } else {
            mainSectionHeaders[name] = line
        }
        return true
    }

    mutating func processIncludes() {
        var included: [String: Int] = [:]
        for (pattern, line) in includes {
            let paths = ConfigGlob.hasWildcard(pattern) ? fileSystem.glob(pattern).map(ConfigPath.clean).sorted() : [pattern]
            for path in paths {
                if path == mainPath {
                    report(mainPath, line, "include: \(path) is the main config file (a file cannot include itself)")
                    continue
                }
                if let first = included[path] {
                    report(mainPath, line, "include: \(path) is already included at line \(first)")
                    continue
                }
                included[path] = line
                do {
                    parseFile(path: path, bytes: try fileSystem.read(path), isMain: false)
                } catch {
                    report(mainPath, line, "include: cannot read \(path): \(error.reason)")
                }
            }
        }
    }

    // MARK: [daemon]

    private mutating func daemonKey(_ key: String, _ value: String, file: String, line: Int, seen: inout [String: Int]) {
        guard ConfigLoader.daemonKeys.contains(key) else {
            if JobSpec.keys.contains(key) {
                report(file, line, "unknown key \"\(key)\" in [daemon] (job keys belong in a [job \"NAME\"] section)")
            } else {
                report(file, line, "unknown key \"\(key)\" in [daemon]\(KeySuggestion.suggest(for: key, among: ConfigLoader.daemonKeys))")
            }
            return
        }
        if key != "include" {
            if let first = seen[key] {
                report(file, line, "\(key) is given more than once (first at line \(first))")
                return
            }
            seen[key] = line
        }
        let directory = ConfigPath.directory(of: file)
        switch key {
        case "socket":
            guard !value.isEmpty else { return report(file, line, "socket: empty path") }
            settings.socket = ConfigPath.resolve(value, relativeTo: directory)
        case "max_running":
            guard !value.isEmpty, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let number = Int(value), number >= 1 else {
                return report(file, line, "max_running: expected a whole number ≥ 1, got \"\(value)\"")
            }
            settings.maxRunning = number
        case "stop_grace":
            do { settings.stopGrace = try DurationText.parse(value) } catch { report(file, line, "stop_grace: \(error.message)") }
        case "log":
            guard DaemonSettings.logTargets.contains(value) else {
                return report(file, line, "log: expected auto, journal or stderr, got \"\(value)\"")
            }
            settings.log = value
        case "metrics_file":
            guard !value.isEmpty else { return report(file, line, "metrics_file: empty path") }
            settings.metricsFile = ConfigPath.resolve(value, relativeTo: directory)
        case "metrics_interval":
            do {
                let interval = try DurationText.parse(value)
                guard interval >= .milliseconds(100) else { return report(file, line, "metrics_interval: must be at least 100ms") }
                settings.metricsInterval = interval
            } catch {
                report(file, line, "metrics_interval: \(error.message)")
            }
        case let key where key.hasPrefix("user_") && ResourceSettings.ceilingKeys.contains(String(key.dropFirst(5))):
            // A ceiling is read as the job key it bounds, and said with its own name.
            let jobKey = String(key.dropFirst(5))
            var raw = OptionValues(settings.access.userCeiling.options)
            raw[jobKey] = value
            do {
                settings.access.userCeiling = try ResourceSettings(single: raw)
                settings.access.userCeilingDeclared[jobKey] = "\(file):\(line)"
            } catch {
                report(file, line, "user_" + error.message)
            }
        case let key where AccessSettings.keys.contains(key):
            if let problem = readAccess(key, value) { report(file, line, problem) }
        default:  // include
            guard !value.isEmpty else { return report(file, line, "include: empty pattern") }
            includes.append((ConfigPath.resolve(value, relativeTo: directory), line))
        }
    }

    /// Reads one access key into `settings.access`; returns the problem, if any.
    private mutating func readAccess(_ key: String, _ value: String) -> String? {
        func whole(_ range: ClosedRange<Int>) -> Int? {
            guard !value.isEmpty, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let number = Int(value),
                  range.contains(number) else { return nil }
            return number
        }
        func wholeProblem(_ range: ClosedRange<Int>) -> String {
            "\(key): expected a whole number from \(range.lowerBound) to \(range.upperBound), got \"\(value)\""
        }
        func names(group: Bool) -> (list: [String]?, problem: String?) {
            do {
                let list = try AccountName.parseList(value, key: key)
                if let missing = list.first(where: { !fileSystem.accountExists($0, group: group) }) {
                    return (nil, "\(key): no such \(group ? "group" : "user") \"\(missing)\"")
                }
                return (list, nil)
            } catch {
                return (nil, error.message)
            }
        }
        switch key {
        case "socket_group":
            let (list, problem) = names(group: true)
            guard let list else { return problem }
            guard list.count == 1 else { return "socket_group: give one group" }
            settings.access.socketGroup = list[0]
        case "allow_users":
            let (list, problem) = names(group: false)
            guard let list else { return problem }
            settings.access.allowUsers = list
        case "allow_groups":
            let (list, problem) = names(group: true)
            guard let list else { return problem }
            settings.access.allowGroups = list
        case let key where AccessSettings.wholeNumberKeys[key] != nil:
            let (range, path) = AccessSettings.wholeNumberKeys[key]!
            guard let number = whole(range) else { return wholeProblem(range) }
            settings.access[keyPath: path] = number
        case "idle_timeout":
            do {
                let timeout = try DurationText.parse(value)
                guard timeout >= .seconds(1) else { return "idle_timeout: must be at least 1s" }
                settings.access.idleTimeout = timeout
            } catch {
                return "idle_timeout: \(error.message)"
            }
        default:  // max_output_memory
            guard let bytes = ByteCount.parse(value), bytes >= 4_096 else {
                return "max_output_memory: expected a size of at least 4K, like 65536, 512K, 64M or 1G, got \"\(value)\""
            }
            settings.access.maxOutputMemory = bytes
        }
        return nil
    }

    // MARK: [cluster]

    private mutating func clusterKey(_ key: String, _ value: String, file: String, line: Int, seen: inout [String: Int]) {
        guard ClusterSettings.keys.contains(key) else {
            return report(file, line, "unknown key \"\(key)\" in [cluster]\(KeySuggestion.suggest(for: key, among: ClusterSettings.keys))")
        }
        if let first = seen[key] { return report(file, line, "\(key) is given more than once (first at line \(first))") }
        seen[key] = line
        if let problem = readCluster(key, value, directory: ConfigPath.directory(of: file)) { report(file, line, problem) }
    }

    /// Reads one `[cluster]` key into `settings.cluster`; returns the problem, if any.
    private mutating func readCluster(_ key: String, _ value: String, directory: String) -> String? {
        var cluster = settings.cluster ?? ClusterSettings()
        defer { settings.cluster = cluster }
        switch key {
        case "etcd":
            let urls = value.split(separator: ",").map { ConfigLexer.trimmed(String($0)) }
            guard !urls.isEmpty, !urls.contains(where: \.isEmpty) else {
                return "etcd: expected a comma-separated list of URLs like http://127.0.0.1:2379, got \"\(value)\""
            }
            for url in urls {
                guard url.hasPrefix("http://") || url.hasPrefix("https://"), url.split(separator: "/").count >= 2,
                      !url.contains(where: { $0 == " " || $0 == "\t" }) else {
                    return "etcd: \"\(url)\" is not an http:// or https:// URL (etcd's client URL, like http://127.0.0.1:2379)"
                }
            }
            cluster.endpoints = urls
        case "ca_file", "cert_file", "key_file":
            guard !value.isEmpty else { return "\(key): empty path" }
            let path = ConfigPath.resolve(value, relativeTo: directory)
            switch key {
            case "ca_file": cluster.caFile = path
            case "cert_file": cluster.certFile = path
            default: cluster.keyFile = path
            }
        case "prefix":
            guard value.hasPrefix("/"), value.count >= 2, !value.contains(where: { $0 == " " || $0 == "\t" }) else {
                return "prefix: expected a key prefix starting with /, like /timerd/, got \"\(value)\""
            }
            cluster.prefix = value.hasSuffix("/") ? value : value + "/"
        case "node":
            guard (1...64).contains(value.utf8.count),
                  value.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2D || $0 == 0x2E || $0 == 0x5F }) else {
                return "node: expected 1 to 64 letters, digits, '.', '-' or '_', got \"\(value)\""
            }
            cluster.node = value
        case "tags":
            guard !value.isEmpty else {
                cluster.tags = []
                return nil
            }
            do { cluster.tags = try Mode.parseNames(value, key: "tags", what: "tag") } catch { return error.message }
        default:  // lease_ttl
            let range = ClusterSettings.leaseTTLRange
            do {
                let ttl = try DurationText.parse(value)
                guard ttl.nanoseconds % 1_000_000_000 == 0, range.contains(Int(ttl.nanoseconds / 1_000_000_000)) else {
                    return "lease_ttl: expected whole seconds from \(range.lowerBound)s to \(range.upperBound)s (etcd leases count seconds), got \"\(value)\""
                }
                cluster.leaseTTL = ttl
            } catch {
                return "lease_ttl: \(error.message)"
            }
        }
        return nil
    }

    // MARK: [pool "NAME"]

    /// Where each pool was declared, and whether it was given its `max_running`.
    var poolDeclared: [String: (at: String, line: Int, file: String, capped: Bool)] = [:]

    /// The pool a `[pool "NAME"]` header declares, or nil when the header is not one (reported when it
    /// starts with `pool` but is malformed or a repeat).
    private mutating func poolHeader(_ inner: String, file: String, line: Int) -> String? {
        guard inner == "pool" || inner.hasPrefix("pool ") || inner.hasPrefix("pool\"") || inner.hasPrefix("pool\t") else { return nil }
        let rest = ConfigLexer.trimmed(String(inner.dropFirst(4)))
        guard rest.count >= 2, rest.hasPrefix("\""), rest.hasSuffix("\"") else {
            report(file, line, "[pool] needs a name in double quotes: write [pool \"NAME\"]")
            return nil
        }
        let name: String
        do { name = try Mode.validName(String(rest.dropFirst().dropLast()), key: "pool", what: "pool name") } catch {
            report(file, line, error.message)
            return nil
        }
        if let first = poolDeclared[name] {
            report(file, line, "pool \"\(name)\" is already declared at \(first.at)")
            return nil
        }
        poolDeclared[name] = ("\(file):\(line)", line, file, false)
        return name
    }

    private mutating func poolKey(_ pool: String, _ key: String, _ value: String, file: String, line: Int) {
        guard key == "max_running" else {
            return report(file, line, "unknown key \"\(key)\" in [pool \"\(pool)\"] (a pool takes max_running)")
        }
        poolDeclared[pool]?.capped = true  // given, if not valid: said below, not again as missing
        guard !value.isEmpty, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let number = Int(value), number >= 1,
              number <= 1_000_000 else {
            return report(file, line, "max_running: expected a whole number of runs at once from 1 to 1000000, got \"\(value)\"")
        }
        if settings.pools[pool] != nil { return report(file, line, "max_running is given more than once in [pool \"\(pool)\"]") }
        settings.pools[pool] = number
    }

    /// Every pool has its `max_running`, and every job's `pool=` names a declared pool.
    mutating func checkPools() {
        for (name, declared) in poolDeclared.sorted(by: { $0.key < $1.key }) where !declared.capped {
            report(declared.file, declared.line, "[pool \"\(name)\"] needs max_running = N (the most runs of its jobs at once)")
        }
        for job in jobs {
            guard let pool = job.spec.pool, poolDeclared[pool] == nil else { continue }
            report(job.file, job.line, "pool: no pool named \"\(pool)\" (declare it: [pool \"\(pool)\"] with max_running = N)")
        }
    }

    // MARK: Chains (`after=`)

    /// Every `after=` names a job of the config, and no job follows itself through others: a cycle is
    /// reported once, at the line of its job whose name sorts first, naming every job in it.
    mutating func checkChains() {
        let upstream = Dictionary(jobs.compactMap { job in job.spec.after.map { (job.spec.name, $0) } }, uniquingKeysWith: { a, _ in a })
        let byName = Dictionary(jobs.map { ($0.spec.name, $0) }, uniquingKeysWith: { a, _ in a })
        for job in jobs {
            guard let after = job.spec.after, byName[after] == nil else { continue }
            report(job.file, job.line, "after: no job named \(after) in the config (after= names a job declared in it)")
        }
        var reported: Set<JobName> = []
        for job in jobs where upstream[job.spec.name] != nil && !reported.contains(job.spec.name) {
            var path = [job.spec.name]
            var next = upstream[job.spec.name]
            while let step = next, !path.contains(step), path.count <= jobs.count {
                path.append(step)
                next = upstream[step]
            }
            guard next == job.spec.name else { continue }  // not a cycle through this job
            let members = Set(path)
            reported.formUnion(members)
            let first = path.min()!
            let start = path.firstIndex(of: first)!
            let cycle = Array(path[start...] + path[..<start]) + [first]
            let at = byName[first]!
            report(at.file, at.line, "after: a cycle of jobs that follow each other: "
                   + cycle.map(\.rawValue).joined(separator: " → "))
        }
    }

    // MARK: [job "NAME"]

    /// The builder for a `[job …]` header, or nil (after reporting) when the header is not one.
    private mutating func jobHeader(_ inner: String, file: String, line: Int) -> JobBuilder? {
        let word = String(inner.unicodeScalars.prefix { $0 != " " && $0 != "\t" && $0 != "\"" && $0 != "'" })
        let rest = ConfigLexer.trimmed(String(inner.unicodeScalars.dropFirst(word.unicodeScalars.count)))
        guard word == "job" else {
            if word == "daemon" || word == "cluster" {
                report(file, line, "[\(word)] takes no name: write [\(word)]")
            } else {
                report(file, line, "unknown section [\(inner)] (expected [daemon], [cluster], [pool \"NAME\"] or [job \"NAME\"])")
            }
            return nil
        }
        var builder = JobBuilder(file: file, line: line)
        guard rest.count >= 2, rest.hasPrefix("\""), rest.hasSuffix("\"") else {
            if rest.isEmpty {
                report(file, line, "[job] needs a name: write [job \"NAME\"]")
            } else {
                let bare = rest.filter { $0 != "\"" && $0 != "'" }
                report(file, line, "the job name must be in double quotes: write [job \"\(bare)\"]")
            }
            return builder  // still check its keys
        }
        do {
            let name = try JobName(String(rest.dropFirst().dropLast()))
            if let first = declared[name] {
                report(file, line, "job \"\(name)\" is already declared at \(first)")
            } else {
                declared[name] = "\(file):\(line)"
                builder.name = name
            }
        } catch {
            report(file, line, error.message)
        }
        return builder
    }

    private mutating func finish(_ builder: JobBuilder) {
        var builder = builder
        let file = builder.file
        var spec = builder.build(report: { report(file, $0, $1) })
        // user= and group= must name accounts that exist (looked up like the zone, through the file system).
        for (key, name, group) in [("user", spec?.user, false), ("group", spec?.group, true)] {
            guard let name, !fileSystem.accountExists(name, group: group) else { continue }
            let line = builder.options.last { $0.option.key == key }?.line ?? builder.line
            report(file, line, "\(key): no such \(group ? "group" : "user") \"\(name)\"")
            spec = nil
        }
        // The zone must exist in the tz database, read through the same file system as the config.
        if let name = spec?.timezone {
            do {
                _ = try TimeZoneDatabase.zone(named: name, read: { path in try? fileSystem.read(path) })
            } catch {
                let line = builder.options.last { ["timezone", "calendar"].contains($0.option.key) }?.line ?? builder.line
                report(file, line, error.message)
                spec = nil
            }
        }
        // Only shared jobs are placed; a config job is shared only when it says so (`docs/cluster.md`).
        if let placed = spec, !placed.runOn.isEmpty, placed.cluster != true {
            let line = builder.options.last { $0.option.key == "run_on" }?.line ?? builder.line
            report(file, line, "run_on needs cluster = yes: only shared jobs are placed on other nodes")
            spec = nil
        }
        if let spec, builder.name != nil, !builder.hadErrors {
            jobs.append(ConfiguredJob(spec: spec, file: builder.file, line: builder.line))
        }
    }
}

/// The options of one `[job]` section as they are read, then validated by `JobSpec`.
private struct JobBuilder {
    let file: String
    /// Line of the `[job]` header.
    let line: Int
    /// Nil when the header's name was invalid or a duplicate: the keys are still checked, the job not kept.
    var name: JobName?
    var options: [(option: KeyValue, line: Int)] = []
    var firstLine: [String: Int] = [:]
    var hadErrors = false
    /// Keys that "did you mean" hints proposed: a missing schedule or action they would supply is not
    /// reported again.
    var suggested: Set<String> = []

    init(file: String, line: Int) {
        self.file = file
        self.line = line
    }

    /// Used to check the keys of a section whose name is unusable.
    private static let placeholderName = try! JobName("job")
    private static let scheduleKeys = ["every", "in", "at", "cron", "calendar"]
    private static let actionKeys = ["command", "argv"]
    /// Stand-ins for a removed schedule or action, so the remaining keys still get checked.
    private static let placeholders = [
        "every": "1s", "in": "1s", "at": "2000-01-01T00:00:00Z", "cron": "* * * * *", "calendar": "daily",
        "command": "true", "argv": "true",
    ]

    mutating func add(_ key: String, _ value: String, line: Int, report: (Int, String) -> Void) {
        guard JobSpec.keys.contains(key) else {
            if ConfigLoader.daemonKeys.contains(key) {
                report(line, "unknown key \"\(key)\" (\(key) belongs in the [daemon] section)")
            } else {
                let close = KeySuggestion.closest(to: key, among: JobSpec.keys)
                if let close { suggested.insert(close) }
                report(line, "unknown key \"\(key)\"\(close.map { " (did you mean \($0)?)" } ?? "")")
            }
            hadErrors = true
            return
        }
        if key == "owner" {
            // A config job belongs to its file; only jobs added over the socket can have an owner.
            report(line, "owner applies only to jobs added over the control socket (config jobs live as long as their file)")
            hadErrors = true
            return
        }
        if !JobSpec.repeatableKeys.contains(key) {
            if let first = firstLine[key] {
                report(line, "\(key) is given more than once (first at line \(first))")
                hadErrors = true
                return
            }
            firstLine[key] = line
        }
        options.append((KeyValue(key, value), line))
    }

    /// The validated spec, or nil after reporting each problem `JobSpec` finds at the line of its key.
    ///
    /// `JobSpec` stops at the first problem, so each offending option is reported and dropped (a dropped
    /// schedule or action is replaced by a stand-in) and the rest validated again, to report them all.
    mutating func build(report: (Int, String) -> Void) -> JobSpec? {
        let name = self.name ?? Self.placeholderName
        var current = options
        var removed: [String] = []
        for _ in 0...(options.count + 2) {
            do {
                return try JobSpec(name: name, options: current.map(\.option), argv: nil)
            } catch {
                hadErrors = true
                if error.code == .missingArgument {
                    let keys = current.contains { Self.scheduleKeys.contains($0.option.key) } ? Self.actionKeys : Self.scheduleKeys
                    let cause = removed.first { keys.contains($0) }
                    if cause == nil, suggested.isDisjoint(with: keys) {
                        // JobSpec's words name the `--` of a request, which a config file does not have.
                        report(line, keys == Self.actionKeys ? JobSpec.actionRequired(programAfterDashes: false) : error.message)
                    }
                    let stand = cause ?? keys[0]
                    current.append((KeyValue(stand, Self.placeholders[stand]!), line))
                    continue
                }
                guard let index = Self.locate(error, in: current, name: name) else {
                    report(line, error.message)
                    return nil
                }
                report(current[index].line, error.message)
                removed.append(current[index].option.key)
                current.remove(at: index)
            }
        }
        return nil
    }

    /// The option an error is about: the only one with its key, or for repeated keys (`env`, `meta`) the
    /// first occurrence at which validating the other keys' options and the occurrences up to it fails
    /// the same way.
    ///
    /// Found by bisection: with every occurrence the options fail the same way (they are the ones that
    /// did), and an occurrence added never takes that failure away. Trying the occurrences one by one,
    /// each a validation of all options, cost occurrences × options per error: a 3.7 KB file with 500
    /// `env` lines, 150 of them bad, took 3 s to check.
    private static func locate(_ target: TimerdError, in options: [(option: KeyValue, line: Int)], name: JobName) -> Int? {
        guard let key = target.key else { return nil }
        let indices = options.indices.filter { options[$0].option.key == key }
        guard indices.count > 1 else { return indices.first }
        func failsTheSameWay(through last: Int) -> Bool {
            let kept = options.indices.filter { options[$0].option.key != key || $0 <= indices[last] }
            do {
                _ = try JobSpec(name: name, options: kept.map { options[$0].option }, argv: nil)
            } catch {
                return error.message == target.message && error.key == key
            }
            return false
        }
        guard failsTheSameWay(through: indices.count - 1) else { return indices.last }
        var low = 0, high = indices.count - 1  // failsTheSameWay(through: high) holds
        while low < high {
            let middle = (low + high) / 2
            if failsTheSameWay(through: middle) { high = middle } else { low = middle + 1 }
        }
        return indices[high]
    }
}
