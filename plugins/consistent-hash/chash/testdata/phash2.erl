%% Prints erlang:phash2(Value, 1 bsl 32) -- make_hash2's full 32 bits --
%% for each Erlang expression in a file, one a line, as "expression<TAB>hash".
%% Fl(Bits) is the float with those IEEE 754 bits. phash2.txt came from
%%
%%   erlc phash2.erl && grep -v "^#" phash2.txt | cut -f1 > /tmp/exprs &&
%%   erl -noshell -run phash2 main /tmp/exprs -s init stop
%%
%% on Erlang/OTP 25.2.3 (Debian 12's erlang-base, the runtime of its
%% rabbitmq-server 3.10.8).
-module(phash2).
-export([main/1]).

main([In]) ->
    {ok, Bin} = file:read_file(In),
    Fl = fun(B) -> <<F:64/float>> = <<B:64>>, F end,
    Bindings = erl_eval:add_binding('Fl', Fl, erl_eval:new_bindings()),
    [begin
         {ok, Toks, _} = erl_scan:string(binary_to_list(L) ++ "."),
         {ok, [E]} = erl_parse:parse_exprs(Toks),
         {value, V, _} = erl_eval:expr(E, Bindings),
         io:format("~s\t~b~n", [L, erlang:phash2(V, 1 bsl 32)])
     end || L <- binary:split(Bin, <<"\n">>, [global, trim_all])],
    ok.
