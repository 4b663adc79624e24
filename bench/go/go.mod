module goshimbench

go 1.19
