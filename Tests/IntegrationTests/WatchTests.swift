import Foundation
import Testing

@Suite struct WatchTests {
    static func event(_ line: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
    }

    @Test func aWatcherSeesAJobsLifeInOrder() throws {
        let daemon = try Daemon()
        let watcher = try Client(path: daemon.socket)
        #expect(try watcher.request("WATCH") == #"OK {"watching":"all"}"#)
        // The registration completes asynchronously; an ADD on another connection then shows up.
        var added: [String: Any] = [:]
        var attempt = 0
        while added.isEmpty {
            attempt += 1
            #expect(try daemon.request("ADD w\(attempt) in=10ms command='echo hi'") == "OK")
            let first = try Self.event(try watcher.readLine())
            if first["event"] as? String == "added" { added = first }
        }
        let name = "w\(attempt)"
        #expect(added["job"] as? String == name)
        var kinds: [String] = []
        while !kinds.contains("finished") {
            let event = try Self.event(try watcher.readLine())
            guard event["job"] as? String == name else { continue }
            kinds.append(event["event"] as! String)
            if event["event"] as? String == "fired" {
                // A 10 ms one-shot cannot have fired before it was due, nor (on an idle daemon) seconds late.
                let late = try #require(event["lateness_ms"] as? Double)
                #expect(late >= 0 && late < 5_000)
            }
            if event["event"] as? String == "finished" {
                #expect(event["result"] as? String == "ok")
                #expect(event["exit_code"] as? Int == 0)
                #expect(event["run"] as? Int == 1)
            }
        }
        #expect(kinds == ["fired", "started", "finished"])
        // Anything a watcher sends is ignored; the daemon carries on.
        try watcher.write("PING\n")
        #expect(try daemon.request("PING") == "OK")
    }

    @Test func filtersByNameAndTag() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("ADD a every=1h tag=t command=true") == "OK")
        #expect(try daemon.request("ADD b every=1h command=true") == "OK")
        #expect(try daemon.request("WATCH nope").hasPrefix("ERR no-such-job "))
        // A tag no job has is as unknown as a name: an error, not a watch that waits forever.
        #expect(try daemon.request("WATCH tag=nothing") == "ERR no-such-job no jobs with tag nothing")
        let nothing = try daemon.ctl("watch", "--tag", "nothing")
        #expect(nothing.status == 1 && nothing.stderr == "timerctl: no jobs with tag nothing (no-such-job)\n", "\(nothing)")
        #expect(try daemon.request("WATCH a b").hasPrefix("ERR bad-argument "))
        let byName = try Client(path: daemon.socket)
        #expect(try byName.request("WATCH b") == #"OK {"watching":"job:b"}"#)
        let byTag = try Client(path: daemon.socket)
        #expect(try byTag.request("WATCH tag=t") == #"OK {"watching":"tag:t"}"#)
        // Keep pausing both until each watcher has seen its own job's event (registration is async).
        var sawB = false, sawA = false
        while !(sawB && sawA) {
            #expect(try daemon.request("PAUSE a b") == "OK")
            #expect(try daemon.request("RESUME a b") == "OK")
            if !sawB { sawB = try Self.event(try byName.readLine())["job"] as? String == "b" }
            if !sawA { sawA = try Self.event(try byTag.readLine())["job"] as? String == "a" }
        }
        #expect(sawA && sawB)
        // A job is gone from the daemon when its cancel's event is made: the tag watcher hears of it still,
        // and the name watcher does not hear of another job's.
        #expect(try daemon.request("CANCEL a") == "OK")
        #expect(try daemon.request("CANCEL b") == "OK")
        var tagged = try Self.event(try byTag.readLine())
        while tagged["event"] as? String != "cancelled" { tagged = try Self.event(try byTag.readLine()) }
        #expect(tagged["job"] as? String == "a")
        var named = try Self.event(try byName.readLine())
        while named["event"] as? String != "cancelled" { named = try Self.event(try byName.readLine()) }
        #expect(named["job"] as? String == "b")
    }

    @Test func aWatcherThatDoesNotReadIsDropped() throws {
        let daemon = try Daemon()
        let slow = try Client(path: daemon.socket)
        #expect(try slow.request("WATCH") == #"OK {"watching":"all"}"#)
        let client = try Client(path: daemon.socket)
        var lines = ""
        for index in 0..<50 { lines += "ADD busy\(index) every=10ms command=true\n" }
        try client.write(lines)
        for _ in 0..<50 { #expect(try client.readLine() == "OK") }
        eventually(timeout: 30, "the slow watcher was dropped") { daemon.log.contains("watcher dropped: it read too slowly") }
        #expect(try daemon.request("PING") == "OK")
        // The watcher's stream ends with the notice.
        var last = ""
        while let line = try? slow.readLine() { last = line }
        #expect(last.contains(#""event":"dropped""#))
    }
}
