%% Erlang/OTP's own scheduler threads (beam.smp: 8 schedulers, dirty CPU
%% and 10 dirty I/O schedulers, its JIT running Erlang code with the stack
%% pointer in the process heap, every thread on a sigaltstack) under
%% tests/run_programs.sh: 2,000 processes computing, a public ETS table
%% written by 100 processes, files read in parallel through the dirty I/O
%% schedulers, 1,000 timers. Results on stdout (compared with the native
%% run); "TASKS n THREADS m" on stderr while every process computes.
-module(threads_erl).
-export([main/1]).

work(I) -> lists:foldl(fun(J, A) -> (A * 31 + I + J) rem 1000003 end, 0, lists:seq(1, 20000)).

threads() ->
    erlang:system_info(schedulers) + erlang:system_info(dirty_cpu_schedulers) +
        erlang:system_info(dirty_io_schedulers).

main([Dir]) ->
    Self = self(),
    N = 2000,
    Go = make_ref(),
    Pids = [spawn(fun() -> receive Go -> ok end, Self ! {done, I, work(I)} end) || I <- lists:seq(1, N)],
    [P ! Go || P <- Pids],
    {ok, Tasks} = file:list_dir("/proc/self/task"),
    io:format(standard_error, "TASKS ~p THREADS ~p~n", [length(Tasks), threads()]),
    Rs = [receive {done, I, R} -> R end || I <- lists:seq(1, N)],
    io:format("processes ~p sum ~p~n", [N, lists:sum(Rs)]),
    T = ets:new(t, [public, set, {write_concurrency, true}]),
    Ws = [spawn_link(fun() -> [ets:insert(T, {K * 100 + I, I}) || K <- lists:seq(1, 500)], Self ! ok end)
          || I <- lists:seq(1, 100)],
    [receive ok -> ok end || _ <- Ws],
    io:format("ets ~p ~p~n", [ets:info(T, size), lists:sum([V || {_, V} <- ets:tab2list(T)])]),
    {ok, Fs} = file:list_dir(Dir),
    Sums = pmap(fun(F) -> {ok, B} = file:read_file(filename:join(Dir, F)), {F, erlang:crc32(B)} end,
                lists:sort(Fs)),
    [io:format("~s ~p~n", [F, C]) || {F, C} <- Sums],
    [erlang:send_after(I rem 50, Self, {t, I}) || I <- lists:seq(1, 1000)],
    io:format("timers ~p~n", [lists:sum([receive {t, I} -> I end || I <- lists:seq(1, 1000)])]),
    halt(0).

pmap(F, L) ->
    S = self(),
    Ps = [spawn(fun() -> S ! {self(), F(X)} end) || X <- L],
    [receive {P, R} -> R end || P <- Ps].
