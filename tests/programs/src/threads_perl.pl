# Perl ithreads (run_programs.sh case "scripts"): Thread::Queue workers,
# Thread::Semaphore, threads returning values, cond_wait/cond_signal.
# Every printed value is independent of scheduling.
use strict; use warnings; use threads; use threads::shared; use Thread::Queue; use Thread::Semaphore;
my $q = Thread::Queue->new(); my $total :shared = 0;
my @w = map { threads->create(sub { while (defined(my $x = $q->dequeue())) { lock($total); $total += $x*$x; } return 1; }) } 1..6;
$q->enqueue($_) for 1..20000; $q->end();
$_->join() for @w;
print "total $total\n";
my $sem = Thread::Semaphore->new(2); my $c :shared = 0; my $m :shared = 0;
my @t = map { threads->create(sub { $sem->down(); { lock($c); $c++; $m = $c if $c > $m; } select(undef,undef,undef,0.001); { lock($c); $c--; } $sem->up(); }) } 1..40;
$_->join() for @t; print "max $m\n";
my @r = map { threads->create(sub { my $s=0; $s += $_ for 1..(100000*$_[0]); $s }, $_) } 1..8;
print join(",", map { $_->join() } @r), "\n";
my $flag :shared = 0;
my $t = threads->create(sub { lock($flag); cond_wait($flag) until $flag; "woke" });
{ lock($flag); $flag = 1; cond_signal($flag); }
print $t->join(), "\n";
