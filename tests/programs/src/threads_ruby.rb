# Ruby's threads (one kernel thread each natively, under the GVL): 200 workers on a Queue,
# a ConditionVariable start handshake, SizedQueue, pipes, Timeout and Thread#raise.
require 'digest/sha2'
require 'thread'
# Digest::SHA256 loaded here, before the threads: its first use from 200
# threads at once (autoloaded through require 'digest') raced in Ruby 3.1
# and failed natively in a Debian 12 chroot ("Digest::Base cannot be
# directly inherited in Ruby").
Digest::SHA256.hexdigest('')
q = Queue.new
m = Mutex.new
cv = ConditionVariable.new
total = 0
ready = 0
workers = 200.times.map do |i|
  Thread.new do
    m.synchronize { ready += 1; cv.broadcast if ready == 200 }
    s = 0
    while (x = q.pop) != :stop
      s += Digest::SHA256.hexdigest((x * (i+1)).to_s).to_i(16) % 1000
    end
    m.synchronize { total += s }
  end
end
m.synchronize { cv.wait(m) while ready < 200 }
20000.times { |k| q << k }
200.times { q << :stop }
workers.each(&:join)
puts "queue done"
# deterministic per-thread work
res = 64.times.map { |i| Thread.new { x = 0; 5000.times { |j| x = (x * 31 + i + j) % 1000003 }; sleep 0.001 * (i % 5); x } }.map(&:value)
puts res.sum
# SizedQueue ping-pong
sq = SizedQueue.new(2)
prod = Thread.new { 10000.times { |i| sq << i }; sq << nil }
sum = 0
while (v = sq.pop); sum += v; end
prod.join
puts sum
# IO in threads: pipes
rd, wr = IO.pipe
t = Thread.new { 2000.times { |i| wr.puts i }; wr.close }
n = rd.each_line.map(&:to_i).sum
t.join
puts n
# Thread#raise / kill / timeout
require 'timeout'
begin
  Timeout.timeout(0.2) { sleep 5 }
rescue Timeout::Error
  puts "timeout ok"
end
th = Thread.new { begin; sleep; rescue => e; e.class.to_s; end }
Thread.pass until th.status == 'sleep'
th.raise(ArgumentError, "x")
puts th.value
